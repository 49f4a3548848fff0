"""A worker process: measures one workload on one cell, or computes its numerics.

Run as `python -m torchgate.measure.worker JOB.json RESULT.json` by the launcher; the process is
the unit of replication and of isolation. Imports only torch, the standard library and the
measure and core rooms, so that the candidate interpreter of an A/B run needs nothing but
torch.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from torchgate.core.lifetime import hold_launcher

if __name__ == "__main__":
    hold_launcher()   # first: end with the launcher (forks while small, one thread, no torch)

import torch

from torchgate.core.config.targets import load_target
from torchgate.core.metrics import PHASES
from torchgate.core.records import dumps, write_text
from torchgate.core.records.job import IMPORTED, Job
from torchgate.core.records.outputs import Coverage, Dynamo, FreshOutputs, ModeOutputs, VersusEager
from torchgate.core.records.schema import (
    COMPILE_STATE,
    BenchProcess,
    Busy,
    Counter,
    ModeTiming,
    NumericsProcess,
    Ranks,
    ShapeRun,
    Spent,
)
from torchgate.core.typed import from_data, to_data
from torchgate.core.vocabulary import Status
from torchgate.measure import callgrind
from torchgate.measure.accelerator import Notes, Unavailable
from torchgate.measure.accelerator import notes as device_notes
from torchgate.measure.accuracy import (
    digest,
    error_metrics,
    fingerprint,
    flatten,
    max_abs_difference,
    nonfinite_count,
)
from torchgate.measure.build import build, configure, failure, unsupported, use_code
from torchgate.measure.device import (
    clock_for,
    memory_in_use_bytes,
    peak_memory_bytes,
    peak_memory_reset,
    resolve_device,
    sync_for,
)
from torchgate.measure.dynamo import DynamoLog, compile_source, inductor_counts, reset_dynamo
from torchgate.measure.energy import SHORT_FOR_TICKS, Energy, busy_share, open_meter
from torchgate.measure.gpu_timing import GpuProcess, GpuTimes
from torchgate.measure.ops import (
    Profiled,
    WorkCounts,
    count_work,
    eager_counts,
    kernel_launches,
    op_coverage,
    profiled,
)
from torchgate.measure.pipeline import Breakdown, Pipeline, measure_breakdown
from torchgate.measure.probe import process_host
from torchgate.measure.ranks import RankGroup, check_ranks
from torchgate.measure.timing import (
    BusyMachine,
    Latency,
    Phases,
    SentinelProbe,
    measure,
    measure_latency,
    run_shapes,
)


class Baton:
    """Turn-taking with the other arm of an interleaved A/B pair, through two pipes from the
    launcher: hand the turn back, then block until it comes again. Without pipes, a no-op."""

    def __init__(self, fds: tuple[int, ...] | None):
        self.fds = fds
        for fd in fds or ():
            os.set_inheritable(fd, False)   # compiler subprocesses must not hold the pipes

    def __call__(self) -> None:
        if not self.fds:
            return
        receive, send = self.fds
        os.write(send, b"y")
        if os.read(receive, 1) != b"g":     # the launcher is gone: nothing to report to
            os._exit(3)


_factories: dict[str, object] = {}


def import_workloads(job: Job) -> None:
    """Import every workload of the job, then say so to the launcher (a file it names), which
    holds an import to its own time limit (bench.import_timeout_s): a module that waits at
    import is that, not a unit that ran out of time. A failed import is kept for the unit to
    record, not run twice."""
    for spec in job.workloads:
        try:
            _factories.setdefault(spec.target, load_target(spec.target))
        except ImportError as exc:
            _factories[spec.target] = exc
    if os.environ.get(IMPORTED):
        with open(os.environ[IMPORTED], "w"):
            pass


def workload_factory(target: str):
    found = _factories.get(target) or load_target(target)
    if isinstance(found, ImportError):
        raise found
    return found


def compile_cache_state() -> str:
    """"warm" when this process's inductor cache already holds an earlier process's work
    (a second start of the program), else "cold"."""
    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return "warm" if folder and os.path.isdir(folder) and os.listdir(folder) else "cold"


def bench_mode(job: Job, factory, device: torch.device, mode: str,
               turn=lambda: None, cache: str | None = None,
               gpu: GpuProcess | None = None, group: RankGroup | None = None) -> ModeTiming:
    """One mode; `group`: a distributed unit's ranks (measure.ranks), whose steps are timed
    on the host clock (each answers once its device finished) and who report the rest."""
    dtype = getattr(torch, job.precision.dtype)
    compiled = mode != "eager"
    if compiled:
        reset_dynamo()
    start = None
    if group is None:
        peak_memory_reset(device)
        start = memory_in_use_bytes(device)   # the floor of the mode's own increment
    workload = build(job, factory, device, dtype, mode) if group is None else group.unit
    clock = clock_for(device.type if group is None else "cpu")
    # A workload of another revision may predate `bytes_moved`.
    bytes_moved = getattr(workload, "bytes_moved", None)
    meter = open_meter(device.type, gpu.sensor if gpu is not None else None, torch)
    sampler = gpu.sampler(workload.flops, bytes_moved, meter) if gpu is not None else None
    busy = {phase: BusyMachine() for phase in PHASES}
    # Graph breaks and recompiles with their reasons; logging fires only while compiling.
    with (DynamoLog() if compiled else contextlib.nullcontext()) as dynamo:
        phases = measure(workload.step, clock, samples=job.timing.samples,
                         sample_target_s=job.timing.sample_target_s,
                         warmup_s=job.timing.warmup_s,
                         min_warmup_calls=job.timing.min_warmup_calls,
                         warmup_max_s=job.timing.warmup_max_s,
                         after_first=dynamo.mark_first if compiled else lambda: None,
                         turn=turn, busy=busy, sampler=sampler,
                         meter=meter if sampler is None else None)
        ranks, rank_peak, rank_dynamo = group.report(
            phases.calls_per_sample * len(phases.steady_s)) if group else (None, None, None)
        # After the steady state, so that it stays comparable with runs without these.
        latency = measure_latency(workload.step, sync_for(device.type if group is None else "cpu"),
                                  min(phases.steady_s), min_calls=job.timing.latency_calls,
                                  target_s=job.timing.latency_s, turn=turn) \
            if job.workload.latency else Latency()
        breakdown = measure_breakdown(workload.step, device.type, lambda: clock_for(device.type),
                                      min(phases.steady_s), min_calls=job.timing.breakdown_calls,
                                      target_s=job.timing.breakdown_s, turn=turn) \
            if isinstance(workload.step, Pipeline) else Breakdown()
        # The first shape's peak (the others may be larger), less the GPU's flush buffer.
        peak = peak_memory_bytes(device) if group is None else rank_peak  # None: no statistics
        if gpu is not None:
            peak, start = (None if v is None else v - gpu.held_bytes for v in (peak, start))
        # The work of one more call, counted: after every timing, at the first shape.
        work = work_counts(workload.step, device.type, compiled) if group is None \
            else WorkCounts()
        operators = profiled(workload.step, sync_for(device.type), job.timing.profile_calls,
                             cuda=device.type == "cuda") \
            if group is None and job.timing.profile_calls else Profiled()
        shapes = run_shapes(workload.shapes, clock, lambda: dynamo.recompiles, turn) \
            if compiled else ()
    bad = sum(nonfinite_count(t) for t in flatten(phases.first_output).values())
    if bad:
        return ModeTiming(Status.NONFINITE, error=f"first call returned {bad} NaN/Inf values")
    return checked(mode_timing(ModeParts(
        phases, workload.items, workload.flops, bytes_moved,
        busy={phase: probe.summary() for phase, probe in busy.items()},
        cpu_busy=busy_share(busy["steady_s"], torch.get_num_threads()),
        energy=meter.record(phases.calls_per_sample * workload.items),
        notes=device_notes(device.type), peak_bytes=peak, start_bytes=start,
        compile_cache=cache if compiled else None, latency=latency, breakdown=breakdown,
        gpu=sampler.record() if sampler is not None else GpuTimes(),
        dynamo=(rank_dynamo or dynamo.summary()) if compiled else None, work=work,
        shapes=shapes, ranks=ranks, operators=operators,
        compile_phases=dynamo.phases(phases.first_call_s) if compiled and group is None
        else {})))


@dataclass(frozen=True)
class ModeParts:
    """What a mode's phases measured, each phase's own result, before they are its record."""
    phases: Phases
    items: int | None
    flops: float | None
    bytes_moved: float | None
    busy: dict[str, Busy | None]          # per timed phase (core.metrics.PHASES)
    cpu_busy: float | None                # None: too short for /proc's clock ticks
    energy: Energy
    notes: Notes
    peak_bytes: int | None
    start_bytes: int | None
    compile_cache: str | None
    latency: Latency
    breakdown: Breakdown
    gpu: GpuTimes
    dynamo: Dynamo | None                 # compiled modes only
    work: WorkCounts
    shapes: tuple[ShapeRun, ...]
    ranks: Ranks | None                   # a distributed unit's
    operators: Profiled                   # self seconds per call by operator (ops.profiled)
    compile_phases: dict[str, float]      # the first call by the compile's phases (dynamo)


def mode_timing(m: ModeParts) -> ModeTiming:
    """A mode's record, each field from the part that measured it; the parts' reasons for
    what they could not measure are merged."""
    p, lat, br, energy, work, dyn = m.phases, m.latency, m.breakdown, m.energy, m.work, m.dynamo
    return ModeTiming(
        Status.OK, first_call_s=p.first_call_s, warmup_s=p.warmup_s,
        warmup_calls=p.warmup_calls, warmup_excess_s=p.warmup_excess_s,
        warmup_settled=p.warmup_settled, compile_cache=m.compile_cache,
        calls_per_sample=p.calls_per_sample, steady_s=tuple(p.steady_s),
        cold_s=m.gpu.cold_s, graph_s=m.gpu.graph_s, gpu=m.gpu.gpu,
        peak_bytes=m.peak_bytes, start_bytes=m.start_bytes,
        items=m.items, flops=m.flops, bytes_moved=m.bytes_moved,
        busy_machine=m.busy["steady_s"], busy_first_call=m.busy["first_call_s"],
        busy_warmup=m.busy["warmup_s"],
        graph_breaks=dyn.graph_breaks if dyn else None,
        graph_break_reasons=dyn.graph_break_reasons if dyn else (),
        recompiles=dyn.recompiles if dyn else None,
        recompile_reasons=dyn.recompile_reasons if dyn else (),
        unique_graphs=dyn.unique_graphs if dyn else None,
        aten_ops=work.aten_ops, aten_ops_by_op=work.aten_ops_by_op,
        flops_per_call=work.flops_per_call, flops_by_op=work.flops_by_op,
        inductor_kernels=work.inductor_kernels, inductor_bytes=work.inductor_bytes,
        kernel_launches=work.kernel_launches,
        latency_calls=lat.calls, latency_p50_s=lat.p50_s, latency_p90_s=lat.p90_s,
        latency_p99_s=lat.p99_s, busy_latency=lat.busy, shapes=m.shapes,
        breakdown_calls=br.calls, input_wait_s=br.input_wait_s, copy_s=br.copy_s,
        copy_bytes=br.copy_bytes, compute_s=br.compute_s, busy_breakdown=br.busy,
        loader_workers=br.loader_workers, torch_threads=br.torch_threads, cores=br.cores,
        cpu_busy=m.cpu_busy, sm_util=energy.sm_util, mem_util=energy.mem_util,
        joules_per_item=energy.joules_per_item, watts=energy.watts,
        unmeasured=merged(br.unmeasured, m.notes.unmeasured, energy.unmeasured,
                          {} if m.cpu_busy is not None else {"cpu_busy": SHORT_FOR_TICKS},
                          work.unmeasured, m.operators.unmeasured),
        clock=m.notes.clock, ranks=m.ranks, operator_s=m.operators.operator_s,
        profile_s=m.operators.wall_s,
        compile_phases=m.compile_phases)


def merged(*reasons: dict[str, str]) -> dict[str, str]:
    """Metric -> why it was not measured, from every part that says."""
    found: dict[str, str] = {}
    for part in reasons:
        found.update(part)
    return found


def checked(timing: ModeTiming) -> ModeTiming:
    """The record as the launcher will read it, checked field by field (core.typed) here,
    where a workload's value of the wrong type is its mode's failure, not the cell's."""
    return from_data(ModeTiming, to_data(timing), "mode")


def work_counts(step, device_type: str, compiled: bool) -> WorkCounts:
    """The exact counts of one call's work (measure.ops): eager, the operators it dispatches
    and their FLOPs; compiled, the kernels inductor generated for it (read before any further
    shape compiles more); on CUDA, the kernels a call launches."""
    found = inductor_counts() if compiled else eager_counts(count_work(step))
    if device_type != "cuda":
        return found
    return dataclasses.replace(found, kernel_launches=kernel_launches(step, sync_for(device_type)))


def run_bench(job: Job) -> BenchProcess:
    device = resolve_device(job.device)
    factory = workload_factory(job.workload.target)
    turn = Baton(job.baton)
    turn()
    machine = SentinelProbe()
    machine.burst()
    cache = compile_cache_state()       # before this process compiles anything
    spread = job.workload.ranks is not None    # a distributed unit: its ranks use the device
    if spread:
        check_ranks(job)
    # CUDA with `timing`: hot/cold/graph series; the flush buffer is allocated here, once.
    gpu = GpuProcess.open(torch, job) if device.type == "cuda" and job.device.timing \
        and not spread else None
    modes = {}
    for mode in job.modes:
        try:
            with RankGroup(job, mode, torch.get_num_threads()) if spread \
                    else contextlib.nullcontext() as group:
                modes[mode] = bench_mode(job, factory, device, mode, turn, cache, gpu, group)
        except Exception as exc:  # one mode failing must not hide the others
            modes[mode] = ModeTiming(*failure(exc))
        machine.burst()           # still this process's turn: between modes, outside timings
    return BenchProcess(Status.OK, sentinel=machine.reading(), modes=modes)


def run_instructions(job: Job) -> BenchProcess:
    """A counts process, under callgrind (measure.callgrind): per mode, the host instructions
    of `Timing.instruction_calls` calls after the mode's warm-up, one thread, the garbage
    collector off. Everything before them (importing torch, building, compiling with the
    counts processes' shared caches) runs uninstrumented."""
    client = callgrind.Client()
    if not client.on_valgrind:
        return BenchProcess(Status.ERROR, error="a counts process runs under valgrind "
                                                "(measure.callgrind.command); this one does not")
    torch.set_num_threads(1)
    device = resolve_device(job.device)
    factory = workload_factory(job.workload.target)
    dumps = callgrind.Dumps()
    calls = job.timing.instruction_calls
    modes, states = {}, []
    for mode in job.modes:
        try:
            counted, compile_total, state = count_instructions(job, factory, device, mode,
                                                               client, dumps)
            modes[mode] = ModeTiming(
                Status.OK, instructions=round(callgrind.totals(counted) / calls),
                compile_instructions=compile_total, instructions_by=tuple(
                    Spent(*found) for found in callgrind.spent([counted], calls)))
            states += [f"{mode}{COMPILE_STATE}{state}"] if state else []
        except Exception as exc:    # one mode failing must not hide the others
            modes[mode] = ModeTiming(*failure(exc))
    counter = Counter("callgrind", os.environ.get(callgrind.VERSION),
                      torch.backends.cpu.get_cpu_capability(),
                      (*callgrind.settings(), *states), calls, torch.get_num_threads())
    return BenchProcess(Status.OK, modes=modes, counter=counter)


def count_instructions(job: Job, factory, device, mode: str, client: callgrind.Client,
                       dumps: callgrind.Dumps) -> tuple[Path, int | None, str | None]:
    """(the dump of the counted calls, the instructions of the compile where it is counted,
    the compile cache state they were counted in: None for eager).

    A compiled mode is counted in one state: compiled in the process (the launcher gives a
    counts process an empty compile cache), dynamo reset, built again and loaded from the
    cache it just wrote. A graph compiled in the process counts 0.9-1.6 % more a call than one
    loaded, and one loaded where the process compiled nothing before 0.9-1.3 % less than one
    loaded after its compile: counts taken before and after a cache was filled, cleared or
    keyed anew would differ by the cache, not the code. The state says both builds'."""
    dtype = getattr(torch, job.precision.dtype)
    compiled = mode != "eager"

    def built():
        if compiled:
            reset_dynamo()
        random.seed(job.seed)
        torch.manual_seed(job.seed)
        return build(job, factory, device, dtype, mode)
    workload = built()
    compile_count, state = None, None
    if compiled:
        workload.step()                      # compiles, or loads what the cache holds
        first = compile_source()
        del workload
        workload = built()
        if job.timing.instructions_compile:
            compile_count = callgrind.totals(_counted(workload.step, 1, client, dumps))
        else:
            workload.step()
        state = f"{first}, then {compile_source()}"
    else:
        workload.step()
    for _ in range(job.timing.min_warmup_calls):
        workload.step()
    return (_counted(workload.step, job.timing.instruction_calls, client, dumps),
            compile_count, state)


def _counted(step, calls: int, client: callgrind.Client, dumps: callgrind.Dumps) -> Path:
    """The dump of `calls` calls of `step`, instrumented only meanwhile."""
    client.start_instrumentation()
    gc.collect()
    gc.disable()     # a collection lands on whichever call crosses its threshold
    try:
        torch._C._valgrind_toggle()
        for _ in range(calls):
            step()
        torch._C._valgrind_toggle_and_dump_stats()
    finally:
        gc.enable()
        client.stop_instrumentation()
    return dumps.next()


def outputs_after_steps(job: Job, factory, device, dtype, mode, after_first=None,
                        workload_index: int = 0) -> dict[str, torch.Tensor]:
    # The global generators restart from the seed for every build, so a workload that draws
    # from them sees the same numbers in the reference, every mode and every process.
    random.seed(job.seed)
    torch.manual_seed(job.seed)
    workload = build(job, factory, device, dtype, mode, workload_index)
    out = None
    for i in range(max(1, workload.train_steps)):
        out = workload.step()
        if i == 0 and after_first is not None:
            after_first()
    named = flatten(out)
    if workload.state is not None:
        named.update(flatten(workload.state(), "state"))
    return {k: v.detach().to("cpu").clone() for k, v in named.items()}


def fresh_process_outputs(job: Job) -> NumericsProcess:
    """Determinism across processes: every workload's eager outputs, computed first thing in
    a fresh process (allocator and caches untouched), as a digest and fingerprints."""
    device = resolve_device(job.device)
    dtype = getattr(torch, job.precision.dtype)
    found = {}
    for i, spec in enumerate(job.workloads):
        try:
            named = outputs_after_steps(job, workload_factory(spec.target), device, dtype, "eager",
                                        workload_index=i)
            found[spec.name] = FreshOutputs(
                Status.OK, digest=digest(named),
                fingerprint={n: fingerprint(t) for n, t in named.items()})
        except Exception as exc:
            found[spec.name] = FreshOutputs(*failure(exc))
    return NumericsProcess(Status.OK, fresh=found)


def run_numerics(job: Job) -> NumericsProcess:
    device = resolve_device(job.device)
    factory = workload_factory(job.workload.target)
    dtype = getattr(torch, job.precision.dtype)
    try:  # first: fallback warnings are emitted once per process
        coverage = op_coverage(job, factory, device, dtype)
    except Exception as exc:
        coverage = Coverage(*failure(exc))
    try:
        reference = outputs_after_steps(job, factory, torch.device("cpu"), torch.float64,
                                        "eager")
    except Exception as exc:   # no reference, nothing to judge: every mode SKIPPED with why
        if not unsupported(exc):
            raise
        return NumericsProcess(Status.OK, coverage=coverage,
                               modes={mode: ModeOutputs(*failure(exc)) for mode in job.modes})
    eager: dict = {}

    def eager_outputs() -> dict[str, torch.Tensor]:
        if not eager:
            eager.update(outputs_after_steps(job, factory, device, dtype, "eager"))
        return eager

    modes = {}
    for mode in job.modes:
        try:
            modes[mode] = mode_outputs(job, factory, device, dtype, mode, reference,
                                       eager_outputs)
        except Exception as exc:
            modes[mode] = ModeOutputs(*failure(exc))
    return NumericsProcess(Status.OK, modes=modes, coverage=coverage)


def mode_outputs(job: Job, factory, device, dtype, mode: str, reference: dict,
                 eager_outputs) -> ModeOutputs:
    """One mode's outputs against float64, run twice (determinism), with their fingerprints;
    in compiled modes also graph breaks and the outputs against eager's."""
    dynamo = None
    if mode == "eager":
        first = eager_outputs()
    else:
        reset_dynamo()
        with DynamoLog() as log:
            first = outputs_after_steps(job, factory, device, dtype, mode,
                                        after_first=log.mark_first)
            dynamo = log.summary()
    again = outputs_after_steps(job, factory, device, dtype, mode)
    versus, versus_error = None, None
    if dynamo is not None:
        try:
            versus = compiled_vs_eager(first, eager_outputs(), reference)
        except Exception as exc:
            versus_error = failure(exc).error
    return ModeOutputs(
        Status.OK, outputs={name: error_metrics(t, reference[name]) for name, t in first.items()},
        rerun_max_abs=max_abs_difference(first, again), digest=digest(first),
        fingerprint={name: fingerprint(t) for name, t in first.items()},
        dynamo=dynamo, vs_eager=versus, vs_eager_error=versus_error)


def compiled_vs_eager(compiled: dict, eager: dict, reference: dict) -> dict[str, VersusEager]:
    """Per output: compiled against eager directly, and eager's own error against float64
    (the dynamo accuracy rule compares the two errors)."""
    found = {}
    for name, t in compiled.items():
        if name not in eager or name not in reference:
            continue
        direct = error_metrics(t, eager[name])
        found[name] = VersusEager(direct.rel_l2, direct.max_abs,
                                  error_metrics(eager[name], reference[name]).rel_l2)
    return found


def main(argv: list[str]) -> int:
    job_path, result_path = argv
    with open(job_path, encoding="utf-8") as fh:
        job = from_data(Job, json.load(fh), "job")
    if job.code:
        use_code(job.code)
    random.seed(job.seed)
    torch.manual_seed(job.seed)
    configure(job)
    started = time.perf_counter()
    import_workloads(job)
    run = {"bench": run_bench, "numerics": run_numerics, "fresh": fresh_process_outputs,
           "instructions": run_instructions}
    kind = BenchProcess if job.kind in ("bench", "instructions") else NumericsProcess
    try:
        body = run[job.kind](job)
    except Unavailable as exc:
        body = kind(Status.SKIPPED, error=str(exc))
    except Exception as exc:
        body = kind(*failure(exc))
    body = dataclasses.replace(body, torch=torch.__version__, pid=os.getpid(),
                               wall_s=time.perf_counter() - started,
                               host=process_host(torch, job.device.type))
    write_text(result_path, dumps(body))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # The result is written: skip the interpreter's teardown, which after torch.compile
    # waits ~1 s for inductor's compile workers (a dozen processes a pull request's check).
    # What the worker started is its launcher's to end (its process group).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
