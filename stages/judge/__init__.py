"""The judge room: statistics and rules, pure (records in, rows out; no files, git, clocks or
markdown). This docstring is the theory behind a verdict: how far to trust one.

The test
--------

The worker process, not the iteration, is the unit of replication. Each process contributes
one summary per metric (its median sample); the comparison is a t-test on the log of these
summaries, so a change reads as a ratio: Welch's against a recorded baseline, a paired one
against a baseline measured in lock-step beside this run (see `stages/arms`). A test on
pooled samples takes the offsets between worker processes for a change of the code. From 8
lock-step pairs on the paired test is trimmed (Yuen's, `stats.paired_shift`): the n // 8
highest and lowest pair ratios are left out, since a process now and then runs 25-40 %
slower for a stretch or its whole life while its partner does not (2-23 % of pairs on a
2-core VM before pairs shared their core, 1 in 400 after),
and one such pair of 8 hid a +10 % slowdown from the t-test in most runs. Where pairs share
their cores (bench.pin_pairs) trimming starts at 12 pairs: below, its price on every run
outweighs the rare slow pair it removes.

- REGRESSED / IMPROVED: the change is significant after Holm's step-down adjustment over
  every tested metric of the run (family-wise error rate `stats.alpha`, default 0.05: an
  unchanged unit is REGRESSED in at most α of runs, however many others truly moved) *and*
  its estimate lies beyond the metric's minimum effect δ (`stats.delta`: 5 % steady state,
  20 % first call / compile, cold and warm, 25 % warm-up, 5 / 10 / 20 % latency p50 / p90 /
  p99, 5 % memory). Benjamini-Hochberg's false discovery rate, used before, lets many true
  small changes (an upgrade moving 30 units by +2 %) lift every other test's level: some
  unchanged unit was REGRESSED in 5.3-5.5 % of such runs, 15 % with the unchanged half
  noisier; Holm 0.47 % and 1.3 % (`stats.holm_adjust`, `tests/test_stats_holm.py`). Its
  price: a +10 % unit in that noisy half was caught in 76 % of runs instead of 98 %.
- δ bounds the estimate, not the truth, and is no margin: a true change under δ is
  sometimes REGRESSED. A true +4.5 % (0.9·δ) came out REGRESSED in 9-18 % of runs in the
  turn-3 audit, 15-26 % of a lone unit's at 1-2 % process spreads and 8 processes a side,
  and in none at a 0.2 % spread; a true +5.5 % was caught in all runs at 0.5 % spread and 15
  processes (`tests/test_stats.py::test_delta_bounds_the_estimate_not_the_truth`,
  `tests/test_stats_holm.py::test_delta_is_not_a_margin`). Read δ as the size of change
  worth a look, not a sharp line.
- EQUIVALENT: the change lies within ±δ by two one-sided tests, i.e. its (1 − 2α) interval
  (90 %; 1 − 2α/`max_looks` with adaptive sampling) lies within ±δ. A report shows the
  interval each verdict was decided on: the test's (1 − α) interval for REGRESSED /
  IMPROVED, the equivalence interval otherwise, so an interval shown inside ±δ is always
  EQUIVALENT.
- INCONCLUSIVE: neither; the report says roughly how many worker processes per side would
  decide.

Memory is tested the same way, one value per process (Welch on the logs, Holm, δ): the
mode's own increment, its peak less what the process held as it began (the whole peak
against records older than bench 10); where every process agrees, the ratio decides
exactly and the row stays out of the family.
A ratio of two medians of four, the rule before, called 8 % of unchanged units REGRESSED at
process spreads of 2-8 % (`timings._memory_row`, `tests/test_stats_memory.py`). The summary
lists an undecided change as a possible slowdown only where its estimate lies beyond +δ
and its own interval lies above no change (significant alone, not after Holm).

Exact counts are not tested. An exact count (operators, FLOPs, kernels, graphs) that every
process agrees on is REGRESSED whenever it grew: it cannot move without the code or a library
moving (a count that differs between processes is NOT COMPARABLE, never judged). Host
instructions move by 0.1-0.5 % with where a call's stack and heap start, so each counts process
draws its layout and a unit's counts are tested like a timing (`judge.counts`): their pooled
spread and a prior for a count of their size, in the run's Holm family, against a margin of δ
(0.5 %) or 1.5 layout SDs; undecided after one process a side, counted again up to
bench.instruction_processes, each look at α/2.

The gate's error claim, per rule: a tested timing, memory or host-instruction unit that did not
change is REGRESSED in at most α of runs, all the run's tests together (Holm), for counts where
their layouts spread no more than 1.5 times the prior (simulated: 0-1.3 % of A/A checks
REGRESSED or IMPROVED at 66 k to 100 M a call at the prior's spread, 0.8-4.3 % at 1.5 times it,
`tests/test_instructions.py`); adaptive rounds keep it, their size fixed in advance (`tests/test_adaptive.py`); an exact
count never. The gate's reasons name the budget each regression spends: "more work" (counts, the
code's), "slower" (time on this machine), "more memory", "compiles more".

Two things borrow strength from outside the unit: its process variance is moderated across
the run's units, and a recorded baseline adds the variance of two runs measured apart.

How far to trust a verdict
--------------------------

Adaptive sampling (on by default, `bench.adaptive_budget_s: 60` per cell; `adaptive.py`).
When a baseline exists and a timing comes out INCONCLUSIVE (or REGRESSED: a regression is
confirmed with a fresh batch, which a noisy bimodal cell whose few processes happened to split
between its modes does not survive), the bench stage adds worker processes for that workload
and mode and looks again, at most `bench.max_looks` times: an undecided timing gets rounds up
to `bench.max_processes`, a size fixed in advance (sized from its look's own estimate, the
final test's false alarms rose above α with δ near 0: 0.056-0.058 against 0.050-0.052 of
units); what its look estimated (the "~N processes to decide" of its note) orders the units.
The budget goes first to the workloads a change can
have moved (in lock-step of one interpreter, those whose configuration or module source the
arms differ in; after an upgrade, every one), then to confirmations, then to the units those
processes can decide, the steady state before first call and warm-up, the cheapest first, as
many as the budget affords; one left undecided says how many more would decide it, what
they would take in wall time and which limit kept them out (simulated in
tests/test_adaptive.py: an unchanged unit EQUIVALENT 0.49 → 0.96 of the time where one batch
was added, +10 % REGRESSED 0.82 → 0.97, false REGRESSED unchanged). The
error budget follows the looks: a look only ever stops early for an equivalence, so
EQUIVALENT is decided at α / `max_looks`; an interim REGRESSED always gets a fresh batch, so
a regression decided on processes no interim look had seen is tested at the full α, and one
decided on processes a look had already seen (out of budget) at α / `max_looks`, with a note.
`bench.adaptive_budget_s=0` turns it off.

Variance moderation (`moderation.py`). At 4 processes a side a unit's variance has 3 degrees
of freedom, and the t-test's critical value at the run's level is about 6. The run's units of
one metric share most of their noise, so each unit's variance is moderated towards theirs
(empirical Bayes, Smyth 2004, as in limma's `squeezeVar`): it gains the prior's degrees of
freedom, and a unit whose variance is far above the others' (a bimodal workload) keeps its
own. `compare.md` prints the prior per metric. Simulated at K = 4 processes
(`tests/test_stats_run_level.py`), the median MDE is 10.0 % against plain Welch's 14.4 % when
the units' process spreads range over 1–4 %, and 28.4 % against 30.9 % over 1–15 %, with
false alarms within α in both.

Run-to-run variance (against a recorded baseline only). Two runs measured apart differ by more
than their processes do (machine state, memory layout, a noisy neighbour), and no number of
processes shrinks that. Each timing's standard error includes the variance of a run's offset,
estimated per unit from the committed history (the bench reports at the last
`stats.history_runs` commits with the baseline's hardware, torch version and workload
settings; at least 3 runs) or, without enough history, the prior `stats.run_spread` (3 %
relative SD). The estimate is pooled over the run's units of a metric, with a floor (its own
standard error) instead of 0, and a unit whose own estimate is larger keeps it, with its run
means' H - 1 degrees of freedom plus those the units' scatter lends (`moderation.run_spreads`):
units drift differently, and with run spreads of 0.5-6 % across units the pooled estimate
alone took 12-17 % of simulated A/A runs to a false REGRESSED, this rule 1.0-3.7 %
(`tests/test_stats_unit_drift.py`). Where the history holds runs of the same code and
packages as the baseline's (each newer one said it changed nothing; their processes on the
baseline's hardware, threads included), the reference is their mean, up to
`stats.reference_runs` (5) of them, each workload's of its baseline settings only, and the
comparison's run-to-run variance is (1 + 1/H)·τ² instead of 2·τ²: simulated at τ = 3 %, the
median MDE 20.9 % -> 16.6 % at H = 5 (`run_to_run.like_reference`,
`tests/test_stats_reference.py`). `compare.md` says which source
each run used. A
baseline measured again beside this run, in lock-step, needs none: both arms share the moment,
which is why the arms give much tighter verdicts.

The machine-speed sentinel (`sentinel.py`). Every worker process also times a pure-Python loop
and a 32 MiB memory copy (the standard library's memmove), code that no torch upgrade
touches, in short bursts before its first mode and after each; its reading is the fastest
repetition of each. Against a recorded baseline whose history holds at least 5 runs with a
sentinel that varied, each unit's slope β̂ on the loop is fitted from those runs, and the
unit's change is adjusted, d − β̂·d_s, with the sentinel's and the slope's uncertainty added
and the run-to-run variance left after the sentinel; its note says by how much. Only a
machine that moved beyond ±δ (the loop's or the copy's interval wholly outside) still voids
the timings, with the reason. Simulated (machine drift 1-6 % between runs, units with β
0.6-1.4): cells compared 100 / 87 / 54 % at 1 / 3 / 6 % drift, against 34 / 20 / 5 % under
the guard, false REGRESSED per cell at most 0.3 %, a +10 % unit caught in 70-77 % of cells
compared (`tests/test_stats_sentinel.py`). Where no slope can be fitted (a history shorter
than 5 runs, a new unit) the timing is compared unadjusted, with the run-to-run variance of
the history or the prior (`stats.run_spread`), which holds the machine's drift between runs,
and the same veto beyond ±δ; its note says "not adjusted for the machine". The guard used
there before, the loop's 1 − 2α (90 %) interval required within ±δ/2, tested the sentinel's
own precision: with 3 committed runs it compared 29 / 10 % of cells at 1 / 3 % machine drift,
unadjusted 100 / 89 %, with false REGRESSED in 0.7 / 3.0 % of cells and a +10 % unit caught
in 58 / 19 % of cells (the guard's 17 / 2 %). Otherwise the timing is NOT COMPARABLE
with one line naming the sentinel, its ratio and interval: "machine speed changed" when the
interval lies wholly beyond ±δ, "machine speed not shown" when a side has fewer than two
readings. So a machine several percent slower is never blamed on the code in every row at
once. With another Python version (`python.version` of the two environments) the loop times
the interpreter, not the machine: the copy alone decides, and must then be shown within
±δ/2 (its interval wholly beyond ±δ/2 voids the timings too). A baseline measured side by
side saw the same machine at the same moment, so no sentinel is used there. A baseline whose
sentinel was taken another way (by an earlier torchgate) is not compared: measure it again
(`baseline.measure=rebuild`) or commit a new one.

  Measured on a shared 2-core VM while other programs took half of it or more: the loop's
  process-to-process spread (SD of the log) was 6 % for one burst and 2–4 % for the fastest
  over three bursts (the more the others took, the wider; 4–5 % in the workers of an
  eager-only run, two bursts each); the copy's 4–10 %. At the default 12 readings a side
  (3 workloads × 4 processes) an unchanged machine passes in 95 % of A/A comparisons at a
  1.5 % loop spread, 79 % at 2 %, 52 % at 2.5 %, 25 % at 3 % and 3 % at 4 %; held to the same
  test, a copy spread of 8–10 % would pass in none: why the guard no longer decides where a
  slope is missing. The one-burst sentinel used before spread 2–12 % (loop) and 4–36 % (copy)
  in the 18 arms of 13 bench runs on that machine, and between runs of one afternoon its loop
  moved by up to 17 %: such a machine is vetoed, and the baseline measured again beside the
  run is the comparison to trust.

Busy machine (`timings.py`; the readings come from `stages/measure`). Over every timed phase
(the first call, the warm-up, each steady-state sample; not the waits for a lock-step turn)
the worker reads what else took the CPU: other programs' busy time on the CPUs it may run on
(Linux `/proc/stat` per CPU of its affinity mask), minus the CPU time of the worker and its
descendants (torch.compile's compile workers are its own), and hypervisor steal. Under a
cgroup CPU quota (a container started with `--cpus`, a Kubernetes limit: `cpu.max`, or
`cpu.cfs_quota_us` in cgroup v1) other programs count only where they ate into that quota, so
a container limited to 2 CPUs on a busy 64-CPU host is not read as busy. A process is left out
of a timing's test when, during that timing's phase, other programs and steal together took
more than `compare.busy_share` (25 %) of the CPU it could use, and the report says how many
were; when fewer than two remain on a side, the unit is NOT COMPARABLE. The numbers the pages
show are over the same processes (`summary.py` decides whose numbers are shown). The record
also keeps each phase's run-queue delay (seconds the worker's threads waited for a CPU per
second, from `/proc/self/task/*/schedstat`), which the rule does not use: a workload with more
runnable threads than CPUs waits on its own threads. A phase too short for `/proc`'s 10 ms
clock ticks to read (an eager first call of a few milliseconds) is judged by the steady
samples' reading; where these files do not exist (macOS, some containers) there is no reading
and no process is left out. The sentinel cannot see what this sees: on a 2-core VM, with a test
suite running beside the bench stage, every 2-thread workload of a cell ran 1.6–13× slower
while the single-threaded loop ran at full speed, and the run reported nine false REGRESSED
verdicts before this rule. Leaving processes out on a reading that does not depend on the code
keeps the test fair; a workload that hands its work to a process outside its own tree (a server
started elsewhere) would count it as another program, so set `compare.busy_share=1` for such a
workload.

The self-check (`selfcheck.py`, `rules.py`) measures this machine's real error rates for the
selected matrix:

    python -m torchgate.selfcheck              # reports/selfcheck.md
    python -m torchgate.selfcheck --repeat 3   # also 3 fresh runs in sequence against the first

It measures every cell with 40 worker processes per unit (`--pool`; twice the 20 a side of
pyperf's design), then splits each unit's processes at random into two halves many times and
runs the real comparison on `bench.processes` of each (A/A: the false-alarm rate), and again
with a 10 % slowdown injected into one unit (the detection rate), both within the run and as
against a recorded baseline (the run-to-run variance added), and prints the minimum
detectable effect of every unit. `--repeat N` adds N fresh runs compared with the first,
which includes the machine's drift over time.

A table then sets torchgate beside the rules other tools apply, each judging the same halves
and the same injected slowdowns on the steady-state samples at its own tool's sampling design
(TorchBench one process a side, asv 2 rounds of up to 5 samples, pyperf 20 processes of 3
values): TorchBench's 7 % threshold on the median, `asv compare`'s factor 1.1 with a
Mann–Whitney U test at p < 0.002, and `pyperf compare_to`'s t-test at 95 % (`rules.py`; each
follows the tool's source, named there). Every row is counted per unit (none of the other
tools claims control over a run): its false alarms (the mean over the units and the worst
unit), its detection, and its detection at matched false alarms, each rule's own statistic
thresholded where it calls 1 % of the unchanged units slower. A test on pooled samples takes
the offsets between worker processes for a change of the code, which is why torchgate tests
one value per process: simulated at 3 % process spread, pyperf at its design calls 12-17 % of
unchanged units slower, 22 % at torchgate's 4 processes pooled (tests/test_rules.py).

Lasting shifts in the history (`changepoints.py`, `trends.py`) are found by Apache Otava's
method; `reports/README.md` ("The history") gives its derivation and what it finds. The lag-1
autocorrelation of a short series is corrected for its bias, a shift under the metric's δ is
not reported (`history.min_change`), and history.md says how many shifts chance alone would
show on it (`trends.chance`; `tests/test_history_chance.py`).

A migration (`migration.py`, `readiness.py`) compares two cells with each other, not with a
past: each number target / source with its interval (Welch on the kept processes' logs, no
verdict, no Holm family: information, not a regression). Sides measured apart add both
machines' run-to-run variance, each from its own history as above; simulated with known truth
(τ = 3 %, 2 % process spread, 4 processes, five runs of history a side) the 95 % intervals held
the truth in 96 % of cases, 58 % without it (`tests/test_migration.py`).
"""
