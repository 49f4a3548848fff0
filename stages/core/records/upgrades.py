"""Upgrades of older record formats, one function per (kind, version) -> version + 1, and
per version whose shape changed without a bump, one that reads its older shape (SAME_VERSION).

Users commit their baseline history; a torchgate upgrade must still read and compare it.
Each function takes and returns plain data, so that every later reader sees one format.
"""
from __future__ import annotations

import math


def _bench_1(data: dict) -> dict:
    """Schema 2 writes non-finite numbers as "NaN"/"Infinity" (schema 1 wrote null, the same
    as "not measured") and records adaptive sampling's interim looks. A schema-1 bench record
    holds no non-finite timing (a NaN output stopped the mode), so null stays "not measured"."""
    return {**data, "schema_version": 2}


def _bench_2(data: dict) -> dict:
    """Schema 3 reads what else took the CPU over every timed phase (`busy_first_call`,
    `busy_warmup` beside the steady samples' `busy_machine`), counts the worker's descendants
    as its own, takes the CPUs it may use (affinity, cgroup quota) as capacity and adds the
    run-queue delay. A schema-2 reading covered the steady samples only, against every CPU of
    the host: it stays the steady-state reading, and the judge falls back to it for the phases
    that have none, as schema 2 was judged. Schema 3 also takes the sentinel in bursts and
    says so (`method`); a schema-2 sentinel has none, and the judge compares sentinels taken
    the same way only."""
    return {**data, "schema_version": 3}


def _each_mode(data: dict, fix) -> dict:
    """The bench record with `fix` applied to every mode of every process, in its workloads
    and in its A/B baseline arm's."""
    def workloads(runs: dict) -> dict:
        out = {}
        for name, run in (runs or {}).items():
            processes = []
            for proc in (run or {}).get("processes") or []:
                if isinstance(proc, dict):
                    proc = {**proc, "modes": {mode: fix(mode, m) if isinstance(m, dict) else m
                                              for mode, m in (proc.get("modes") or {}).items()}}
                processes.append(proc)
            out[name] = {**run, "processes": processes}
        return out

    out = {**data, "workloads": workloads(data.get("workloads"))}
    ab = data.get("ab")
    if isinstance(ab, dict) and isinstance(ab.get("baseline"), dict):
        out["ab"] = {**ab, "baseline": {**ab["baseline"],
                                        "workloads": workloads(ab["baseline"].get("workloads"))}}
    return out


def _bench_3(data: dict) -> dict:
    """Schema 4 measures warm-up as the calls until steady-state speed, found from the data.
    A schema-3 `warmup_s` was the configured `bench.warmup_s` plus one call, whatever the
    workload did: not the same quantity, so it is dropped rather than compared. Schema 4 also
    says which compile cache a first call found; every schema-3 process compiled cold."""
    def fix(mode: str, m: dict) -> dict:
        m = {**m, "warmup_s": None, "warmup_calls": None}
        if mode != "eager" and m.get("first_call_s") is not None:
            m["compile_cache"] = "cold"
        return m

    return {**_each_mode(data, fix), "schema_version": 4}


def _bench_4(data: dict) -> dict:
    """Schema 5 adds the GPU timing series (`cold_s`, `graph_s`), how each series ended and
    what NVML read (`gpu`), and a workload's `bytes_moved`; all optional, so a schema-4
    record reads as one measured without them (its `steady_s` is the hot series)."""
    return {**data, "schema_version": 5}


def _bench_5(data: dict) -> dict:
    """Schema 6 records where each worker process ran (`host`: the machine, the Ray node,
    the hardware key read by the process). A schema-5 process has none; the judge then takes
    the hardware from the environments, as schema 5 was judged."""
    return {**data, "schema_version": 6}


def _bench_6(data: dict) -> dict:
    """Schema 7 adds, for a unit a Ray node ran, the window it held that node (`host.window_ms`);
    optional, so a schema-6 record reads as one whose windows were not kept."""
    return {**data, "schema_version": 7}


def _bench_7(data: dict) -> dict:
    """Schema 8 records a distributed unit's ranks (a mode's `ranks`: per rank, the all-reduce
    time per step, the straggler) and a workload's `ranks` and `slow_rank`; a schema-7 record
    has no distributed unit."""
    return {**data, "schema_version": 8}


def _bench_8(data: dict) -> dict:
    """Schema 9 records where the step goes (an input pipeline's wait, copy and compute per
    step, `breakdown_calls` ... `busy_breakdown`) and the utilization and energy of the steady
    state (`cpu_busy` ... `watts`). A schema-8 mode measured none of them: not measured."""
    return {**data, "schema_version": 9}


def _bench_9(data: dict) -> dict:
    """Schema 10 records what a process held as each mode began (`start_bytes`), so that
    memory is judged by the mode's own increment. A schema-9 mode has none: its whole peak
    is compared, as schema 9 was judged."""
    return {**data, "schema_version": 10}


def _bench_10(data: dict) -> dict:
    """Schema 11 counts the operators one eager call dispatches (`aten_ops`, and by operator
    `aten_ops_by_op`). A schema-10 mode counted none: not measured."""
    return {**data, "schema_version": 11}


def _bench_11(data: dict) -> dict:
    """Schema 12 counts more of a call's work: FLOPs (`flops_per_call`, `flops_by_op`),
    inductor's kernels and bytes (`inductor_kernels`, `inductor_bytes`) and CUDA kernel
    launches (`kernel_launches`). A schema-11 mode counted none of them: not measured."""
    return {**data, "schema_version": 12}


def _bench_12(data: dict) -> dict:
    """Schema 13 counts host instructions per call in counts processes beside the timed ones
    (`WorkloadRun.counts`, `BenchProcess.counter`, `ModeTiming.instructions`) and says why
    where none were (`instructions`). A schema-12 record counted none: not measured."""
    return {**data, "schema_version": 13}


def _bench_13(data: dict) -> dict:
    """Schema 14 records, for each process of a lock-step pair, its waits for the other arm's
    turns and the CPU it used meanwhile (`waiting`). A schema-13 process has none: not
    measured."""
    return {**data, "schema_version": 14}


def _bench_14(data: dict) -> dict:
    """Schema 15 records, for each mode with an input pipeline, what contends for the cores
    during its breakdown (`loader_workers`, `torch_threads`, `cores`), and for each look of
    adaptive sampling what its budget funded and skipped (`funded`, `skipped`). A schema-14
    record has neither: the diagnosis cannot say whether the cores were oversubscribed, and
    its looks not what the budget left out."""
    return {**data, "schema_version": 15}


def _bench_15(data: dict) -> dict:
    """Schema 16 records what one item of a workload is (`spec.item`: "token" for a decoder),
    so that pages say tokens/s; a schema-15 workload's items are items."""
    return {**data, "schema_version": 16}


def _bench_16(data: dict) -> dict:
    """Schema 17 records, per workload, what its counts are a function of (`counts_key`),
    where counts not counted by the arm's own process came from (`counts_from`: carried from
    a committed record with the same key, or counted once for both arms), and why a workload
    the same in both arms ran fewer rounds (`unchanged`). A schema-16 workload has none: its
    counts are its own, carried to no later run."""
    return {**data, "schema_version": 17}


def _migration_1(data: dict) -> dict:
    """Migration 2 records the counts of each side's work per mode (`work`); migration 1
    has none: not counted."""
    return {**data, "schema_version": 2}


def _numerics_3(data: dict) -> dict:
    """Schema 4: the hosts' Ray window (bench 7's `host.window_ms`); optional, as in bench 7."""
    return {**data, "schema_version": 4}


def _numerics_2(data: dict) -> dict:
    """Schema 3 records where each numerics worker process ran (`hosts`); schema 2 has none."""
    return {**data, "schema_version": 3}


def _numerics_1(data: dict) -> dict:
    """In schema 1 an error of a NONFINITE mode was null; schema 2 says NaN (measured, not
    finite), keeping null for "not measured" (an empty output, a check that did not run)."""
    def fix(modes: dict) -> dict:
        fixed = {}
        for mode, ev in modes.items():
            if isinstance(ev, dict) and ev.get("status") == "NONFINITE":
                ev = {**ev, **{key: {name: math.nan if v is None else v
                                     for name, v in (ev.get(key) or {}).items()}
                               for key in ("rel_l2", "max_abs", "cosine") if key in ev}}
            fixed[mode] = ev
        return fixed

    out = {**data, "schema_version": 2,
           "workloads": {w: fix(m) for w, m in (data.get("workloads") or {}).items()}}
    ab = data.get("ab")
    if isinstance(ab, dict) and isinstance(ab.get("baseline"), dict):
        base = ab["baseline"]
        out["ab"] = {**ab, "baseline": {**base, "workloads": {
            w: fix(m) for w, m in (base.get("workloads") or {}).items()}}}
    return out


def _env_1(data: dict) -> dict:
    """Schema 2 keeps the fingerprint and the digest out of env.json (fingerprint.json beside
    it: a pip install rewrote env.json, and so re-measured everything), and its
    `distributions` are the packages that matter. Schema 1 listed every installed
    distribution there: read as `installed`, which comparisons restrict to the names that
    matter on the other side (core.records.packages)."""
    env = data.get("env")
    if isinstance(env, dict) and "distributions" in env:
        env = {**{k: v for k, v in env.items() if k != "distributions"},
               "installed": env["distributions"]}
    return {**{k: v for k, v in data.items() if k not in ("fingerprint", "digest")},
            "env": env, "schema_version": 2}


CHANGE = ("ratio", "ci_low", "ci_high", "p", "n_base", "n_now", "spread", "test", "p_adjusted",
          "mde", "needed")


def _compare_1(data: dict) -> dict:
    """Schema 1 rows carried a tested change's fields flat; schema 2 nests them in `change`,
    with the interval's confidence (schema 1 showed 1 - alpha)."""
    confidence = 1 - data.get("alpha", 0.05)
    rows = []
    for row in data.get("rows") or []:
        flat = {k: v for k, v in row.items() if k not in CHANGE}
        if row.get("ratio") is not None:
            flat["change"] = {**{k: row.get(k) for k in CHANGE}, "confidence": confidence}
        rows.append(flat)
    return {**data, "schema_version": 2, "rows": rows}


def _compare_2(data: dict) -> dict:
    """Schema 3 keeps, on a row, whether the judge lists it as a possible slowdown (before,
    each page applied the rule itself: an undecided change whose estimate lies beyond +δ and
    whose interval lies above no change), and the run's variance-moderation priors (a
    schema-2 record kept none)."""
    def listed(row: dict) -> bool:
        change, delta = row.get("change") or {}, row.get("delta")
        return (row.get("verdict") == "INCONCLUSIVE" and delta is not None and bool(change)
                and change.get("ratio", 0) > 1 + delta and change.get("ci_low", 0) > 1)
    rows = [{**row, "possible_slowdown": listed(row)} if isinstance(row, dict) else row
            for row in data.get("rows") or []]
    return {**data, "schema_version": 3, "rows": rows}


def _compare_3(data: dict) -> dict:
    """Schema 4 keeps a stamp of what it compared (`inputs`: the cells, their records and the
    baseline named); a schema-3 record has none, and no gate takes it for this run's."""
    return {**data, "schema_version": 4}


def _without_control(data: dict) -> dict:
    """Bench records written from 3c30acb to e897b3a (schemas 5 and 6) may carry the in-process
    control, removed without a schema bump: `settings.control` and each mode's `control_s` (a
    numpy kernel timed beside each sample). Both are dropped: the steady state is tested as it
    is, as every record without the control was (a control only replaced it in the test
    where it cut the process spread)."""
    out = _each_mode(data, lambda mode, m: {k: v for k, v in m.items() if k != "control_s"})
    settings = data.get("settings")
    if isinstance(settings, dict):
        out["settings"] = {k: v for k, v in settings.items() if k != "control"}
    return out


UPGRADES = {("bench", 1): _bench_1, ("bench", 2): _bench_2, ("bench", 3): _bench_3,
            ("bench", 4): _bench_4, ("bench", 5): _bench_5, ("bench", 6): _bench_6,
            ("bench", 7): _bench_7, ("bench", 8): _bench_8, ("bench", 9): _bench_9,
            ("bench", 10): _bench_10, ("bench", 11): _bench_11, ("bench", 12): _bench_12,
            ("bench", 13): _bench_13, ("bench", 14): _bench_14,
            ("bench", 15): _bench_15, ("bench", 16): _bench_16,
            ("numerics", 1): _numerics_1,
            ("numerics", 2): _numerics_2, ("numerics", 3): _numerics_3,
            ("compare", 1): _compare_1, ("compare", 2): _compare_2, ("compare", 3): _compare_3,
            ("migration", 1): _migration_1,
            ("env", 1): _env_1}

# A version whose shape changed without a bump: its records, as read, are first made the shape
# the version has now (before its upgrade to the next one, if any).
SAME_VERSION = {("bench", 5): _without_control, ("bench", 6): _without_control}
