"""Each record kind's format history, and the upgrades that read an older version.

Users commit their baseline history; a torchgate upgrade must still read and compare it. A
record of an older version is read through UPGRADES, one function per (kind, version) ->
version + 1 where that version's data must change to read right (the versions that only
added optional fields need none), and SAME_VERSION, per version whose shape changed without a
bump, one that reads its older shape. Each takes and returns plain data, so that every later
reader sees one format.
"""
from __future__ import annotations

import math

# ---- when a kind's version goes up -----------------------------------------------------------
# A version says how to read a record, not which fields it has. A kind gets a new version (an
# entry in HISTORY, an upgrade in UPGRADES where its older data must change, and a fixture
# tests/fixtures/schema/<kind>-v<N>.json) only where a reader would misread a record:
#   - a field's meaning or unit changes: an older record would be read as the new meaning;
#   - a field is removed or renamed: the older records that hold it would be refused (a
#     removal without one made a month of bench records unreadable: SAME_VERSION);
#   - a field's type narrows or changes, or a field becomes required;
#   - an optional field's default changes: a record leaves out a field at its default, so
#     every record that did would read as the new default.
# A new field with a default (None: not measured; an empty tuple or dict: none) needs none of
# this, as long as the default says truly what a record without it measured: such a record
# reads as the default (core.typed); a record holding the default leaves it out, so an older
# torchgate reads it as before, and one holding another value is refused by that torchgate,
# naming the field, never misread. Add the field and its reader; nothing here. The shape guard
# (tests/test_schema_fixtures.py) tells the two apart: an added field with a default passes, a
# removed, renamed or retyped field, a required one or a changed default asks for a version.

# One entry per version: what changed, and what a reader would have misread without the
# version. Each kind's current version is its newest entry (records.SCHEMA). The versions whose
# entry says "optional fields only" were bumped before the rule above, which needs none for
# them; their numbers stay, as their records carry them.
OPTIONAL = "optional fields only, which no reader misreads"
HISTORY: dict[tuple[str, int], str] = {
    ("bench", 1): "the first format",
    ("bench", 2): "a measured non-finite number is \"NaN\"/\"Infinity\" and null only \"not "
                  "measured\" (schema 1 wrote null for both), and the interim looks of adaptive "
                  "sampling (`looks`). Meaning: null no longer stands for a non-finite value; "
                  "no schema-1 timing was one (a NaN output stopped the mode), so its nulls "
                  "read as \"not measured\" unchanged",
    ("bench", 3): "the busy readings cover every timed phase (`busy_first_call`, `busy_warmup`), "
                  "count the worker's descendants as its own, take the CPUs it may use as "
                  "capacity and add the run-queue delay; the sentinel is taken in bursts "
                  "(`method`). Meaning: a schema-2 `busy_machine` is a share of every CPU of "
                  "the host over the steady samples only, and its sentinel one burst: the judge "
                  "falls back to it for the other phases and compares sentinels of one method",
    ("bench", 4): "`warmup_s` is the calls until steady-state speed, found from the data "
                  "(`warmup_calls`), and a first call says which compile cache it found "
                  "(`compile_cache`). Meaning: a schema-3 `warmup_s` was the configured warm-up "
                  "plus one call, another quantity (the upgrade drops it), and every schema-3 "
                  "compiled first call was cold",
    ("bench", 5): f"{OPTIONAL}: the GPU series (`cold_s`, `graph_s`, `gpu`), `bytes_moved`",
    ("bench", 6): f"{OPTIONAL}: where each process ran (`host`). The in-process control "
                  "(`settings.control`, `control_s`), which bench 5 and 6 records may hold, was "
                  "then removed without a version, and such records refused (SAME_VERSION "
                  "drops it)",
    ("bench", 7): f"{OPTIONAL}: a Ray node's window (`host.window_ms`); a parallel branch's "
                  "version 7 became 8 at the merge",
    ("bench", 8): f"{OPTIONAL}: a distributed unit's ranks (a mode's `ranks`, a workload's "
                  "`ranks` and `slow_rank`)",
    ("bench", 9): f"{OPTIONAL}: where the step goes (`breakdown_calls` ... `busy_breakdown`), "
                  "utilization and energy (`cpu_busy` ... `watts`)",
    ("bench", 10): f"{OPTIONAL}: what a process held as each mode began (`start_bytes`; "
                   "without it the whole peak is compared)",
    ("bench", 11): f"{OPTIONAL}: the operators one eager call dispatches (`aten_ops`, "
                   "`aten_ops_by_op`)",
    ("bench", 12): f"{OPTIONAL}: FLOPs (`flops_per_call`, `flops_by_op`), inductor's kernels "
                   "and bytes, CUDA kernel launches",
    ("bench", 13): f"{OPTIONAL}: host instructions per call (`WorkloadRun.counts`, "
                   "`BenchProcess.counter`, `ModeTiming.instructions`, `instructions`)",
    ("bench", 14): f"{OPTIONAL}: a lock-step process's waits for the other arm (`waiting`)",
    ("bench", 15): f"{OPTIONAL}: what contends for the cores in a step breakdown "
                   "(`loader_workers`, `torch_threads`, `cores`), what a look funded and "
                   "skipped (`funded`, `skipped`)",
    ("bench", 16): f"{OPTIONAL}: what one item of a workload is (`spec.item`; without it, an "
                   "item)",
    ("bench", 17): f"{OPTIONAL}: what a workload's counts are a function of (`counts_key`), "
                   "where counts not its own came from (`counts_from`), why it ran fewer "
                   "rounds (`unchanged`)",
    ("numerics", 1): "the first format",
    ("numerics", 2): "an error of a NONFINITE mode is NaN, null only \"not measured\". Meaning: "
                     "schema 1 wrote a non-finite error as null (the upgrade makes it NaN)",
    ("numerics", 3): f"{OPTIONAL}: where each worker process ran (`hosts`)",
    ("numerics", 4): f"{OPTIONAL}: a Ray node's window (`host.window_ms`, as bench 7)",
    ("compare", 1): "the first format",
    ("compare", 2): "a tested change's fields nest in a row's `change`, with the interval's "
                    "confidence. Renamed: schema 1's flat fields would be refused (the upgrade "
                    "nests them, the confidence 1 - alpha)",
    ("compare", 3): "a row says whether the judge lists it as a possible slowdown "
                    "(`possible_slowdown`), and the run keeps its variance-moderation priors. "
                    "Meaning: a schema-2 row without it would read as not listed where its "
                    "page listed it (the upgrade applies the pages' rule)",
    ("compare", 4): f"{OPTIONAL}: a stamp of what was compared (`inputs`; without it no gate "
                    "takes the record for its run's)",
    ("migration", 1): "the first format",
    ("migration", 2): f"{OPTIONAL}: each side's counts of a call's work per mode (`work`)",
    ("env", 1): "the first format",
    ("env", 2): "`distributions` are the packages that matter, the fingerprint and digest move "
                "to fingerprint.json. Meaning and removal: schema 1's `distributions` was every "
                "installed distribution (the upgrade reads it as `installed`), and its "
                "`fingerprint` and `digest` would be refused",
}


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


UPGRADES = {("bench", 3): _bench_3, ("numerics", 1): _numerics_1, ("env", 1): _env_1,
            ("compare", 1): _compare_1, ("compare", 2): _compare_2}

# A version whose shape changed without a bump: its records, as read, are first made the shape
# the version has now (before its upgrade to the next one, if any).
SAME_VERSION = {("bench", 5): _without_control, ("bench", 6): _without_control}
