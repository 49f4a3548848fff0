"""The measure room: the code that runs inside a worker process. It imports torch and
`torchgate.core` only (the other arm of an A/B run has torch alone). This docstring is the
measurement method.

Processes, the unit of replication
----------------------------------

Each cell runs `bench.processes` fresh worker processes per workload (workloads shuffled within
each round, so a slow moment hits all alike). In each process, per mode: the first call (in
compiled modes: the compile), the warm-up, then `bench.samples` steady-state samples, each
timing back-to-back calls that last about `bench.sample_target_s` (CUDA events on a GPU,
`perf_counter` after a device synchronize elsewhere; a CUDA device with a `timing` section adds
a cold series and more, below). Each process contributes one summary per metric, its median
sample, and the judge tests those (`stages/judge`): a test on pooled iterations takes the
offsets between worker processes for a change of the code.

First call: cold and warm compile
---------------------------------

The first call is two metrics. Per unit (cell, workload, arm), the first
`bench.cold_compile_processes` (2) processes compile with empty inductor caches, as a
program's first start does: `first_call_s`, the cold compile. The others find the caches those
left (inductor's FX graph and AOT autograd caches, compiled kernels), as a second start of the
same program does: `first_call_warm_s`, the warm compile, which still traces with dynamo. Each
is tested against its own kind in the baseline; every eager first call counts as cold (nothing
is cached). The record says per process which caches it found (`compile_cache`), from the
cache folder itself. Measured on a shared 2-core VM: a cold compile of `matmul_relu` or
`mlp_train` 7–8 s, a warm one 1.3 s; importing torch costs each process about 2 s more.

Warm-up
-------

Warm-up is what it costs to get from the first call to steady-state speed: the calls after the
first up to and including the first that runs at the steady level, their number
(`warmup_calls`) and their excess over that level (`warmup_excess_s`). Calls are timed one by
one for at least `bench.warmup_s` and `bench.min_warmup_calls` calls, then until they stop
getting faster (the last 5 calls' median no more than 10 % below the 5 before), but no longer
than `bench.warmup_max_s`, after which the mode is marked unsettled (`warmup_settled: false`).
The steady level is the last 5 calls' median; the steady state starts at the first call from
which every 5-call window's median is within 10 % of it, so a single slow call later on is
noise, not warm-up. A workload whose first 50 calls are slow shows a warm-up of 50 calls; one
that is steady from its second call, a warm-up of one call.

Peak memory
-----------

The device allocator's peak on a GPU (`allocated_bytes.all.peak` of
`torch.accelerator.memory_stats()` on any other accelerator), and on the CPU the worker's own
resident high-water mark during that mode (Linux `VmHWM`, reset at the start of each mode;
`getrusage` is not used, as it keeps the high-water mark of the parent the worker was forked
from). What the process held as the mode began (allocated on a device, resident on the CPU)
is recorded beside it: the judge compares the mode's own increment, peak less start, so that
the ~300 MiB of libraries a CPU process holds do not hide a workload's memory inside δ.

The machine-speed sentinel and the busy probe (`timing.py`, `proc.py`) are read here, around
every timed phase; the judge decides with them (see `stages/judge`).

Counts of work
--------------

After its timings each process counts one more call of each mode exactly (`ops.py`,
`dynamo.py`): operators dispatched and FLOPs (eager), graphs and generated kernels (compiled),
kernel launches (CUDA). After every timed process of a cell, one counts process per workload
and arm counts host instructions per call under valgrind's callgrind (`callgrind.py`; CPU
cells, `bench.instructions`): one thread, instrumentation off until the counted calls, as many
processes at once as the machine has cores, since a count does not move with the load.

Distributed units
-----------------

A workload with `_ranks_: N` runs each mode as N data-parallel ranks that the worker starts and
drives in lock-step (`ranks.py`, `rank.py`): one call of the unit's step is one step of every
rank, timed on the host clock as above. Each rank times its all-reduce per step with a DDP
communication hook (`rank.py`) and its time to the collective; after the steady state they
report, and the record keeps the all-reduce of the last rank to arrive, the bus bandwidth and
the straggler (core.records.schema.Ranks). Peak memory is the largest rank's; graph breaks are rank 0's.

Where the step goes; utilization and energy
-------------------------------------------

A workload with an input pipeline (`batches`) is timed as fetch, copy and compute in every
phase; after the steady state, single steps are timed part by part (`pipeline.py`): the wait
for the next host batch (host clock), the copy to the device and the compute (the device's
clock), the device idle at each step's start. Over the steady-state samples (on CUDA the hot
series) every mode reads the process's CPU busy share, NVML's SM and memory utilization and an
energy counter, RAPL's or NVML's, for joules per item (`energy.py`); a reading that cannot be
had is recorded as not measured, with the reason.

GPU timing
----------

A CUDA device with a `timing` section (`conf/device/cuda.yaml` has one) is timed as the best
GPU harnesses do it. After the first call and the warm-up, each mode takes up to three series
of samples, each between one pair of CUDA events (`gpu_timing.py`):

- `hot` (`steady_s`): back-to-back calls lasting about `bench.sample_target_s`, the caches warm
  from the call before.
- `cold` (`cold_s`): one call, after the L2 cache was flushed by zeroing a buffer of
  `timing.flush_mib` (256 MiB, as triton's `do_bench`); the zeroing is queued before the start
  event, so it never lands inside the timed window.
- `graph` (`graph_s`): the step captured once as a CUDA graph, replayed back to back: what the
  kernels cost without launch overhead.

`timing.series` chooses them (`[hot, cold]` by default; `hot` is required). The flush buffer is
allocated once per worker process, before its first mode, and left out of every mode's peak
memory. A step that cannot be captured as a graph (a training step whose optimizer is not
`capturable`, a mode that already uses CUDA graphs) keeps its hot and cold series, and the
report says why its graph series is missing. A cold sample includes whatever the host adds
between the start event and the kernels; the flush (tens of microseconds) normally hides the
launch, but a step whose Python overhead exceeds it is timed with that overhead, as in any
single-call timing.

- Stopping rule (NVBench's): a series takes at least `bench.samples` samples, then stops as
  soon as their relative SD is at most `timing.max_rel_sd` (0.5 %); a series that stays noisier
  stops at `timing.max_samples` (100) or after `timing.timeout_s` (1 s) of sampling, and the
  record and the report say which (`stop`: quiet, timeout, max_samples; `fixed` with
  `max_rel_sd: 0`, which takes exactly `bench.samples`).
- Clocks and throttling (`nvml.py`): with `nvidia-ml-py` installed (`pip install -e '.[gpu]'`),
  NVML reads the SM clock, temperature, power and clock-event reasons of every sample window,
  after the end event is queued and while the device still works, so that reading it puts no
  host time inside the window (a few microseconds of host overhead read as a 30 % regression
  in triton #6066). A window whose SM clock is under `timing.throttle_clock` (75 %) of the
  default applications clock (else the maximum), or that a thermal or hardware slowdown hit,
  is taken again up to `timing.throttle_redos` (3) times per series, then kept and flagged.
  The software power cap alone is recorded but not counted: a large matmul runs at the power
  cap as a matter of course, and that is its real speed. Without NVML nothing is read and
  nothing is flagged; the report says so.
- Roofline check (`gpu_rules.py`): from the workload's `flops` (and `bytes_moved`) per step
  and each series' median, the achieved TFLOP/s (and GB/s) against the peak of the cell's
  arithmetic (fp32, tf32, bf16, fp16, fp64, from the precision's dtype, matmul precision and
  autocast). Peaks come from `timing.peak_tflops` / `timing.peak_gbps`, else from the
  datasheets torchgate knows (H100 SXM and H200 SXM: bf16 and fp16 989, tf32 495, fp32 67
  dense TFLOP/s; HBM 3,350 and 4,800 GB/s). A rate beyond the peak by more than
  `timing.roofline_margin` (5 %) is a measurement error, not a speed-up: the report marks it
  IMPOSSIBLE and that series' timings are NOT COMPARABLE. Bandwidth is checked on the cold
  series only: a hot step may be served by L2, faster than HBM.

A CUDA device without a `timing` section is timed as any other: `bench.samples` hot samples,
nothing else.

The GPU timing rules are pure functions (`gpu_rules.py`), and the sampling code is tested on a
simulated device (`tests/fake_gpu.py`, as triton tests its timer): a stream whose work runs in
order on a timeline, a host whose launches take time, events that stamp the stream when they
are reached, a cold call costing a cache-miss penalty more. The tests
(`tests/test_gpu_timing.py`, about a second) show cold and hot each recovered within 1 %, no
flush inside any timed window and the buffer allocated once, a slow NVML read adding nothing,
the stopping rule stopping at the minimum on quiet data and reporting a timeout (or the sample
cap) on noisy data, throttled samples redone and then flagged, and an impossible TFLOP/s
flagged.
"""
