"""The guards fail closed, shown by injecting faults into records and comparing them through
the real comparison: processes that ran while other programs or the hypervisor took the CPU are
left out of the tests of the phase they ran in."""
import dataclasses
import random

from stages.core.config import TIMED, Config, Matrix
from stages.core.inputs import Pair, RunInputs
from stages.core.schema import Busy, EnvRecord
from stages.judge.run import compare_run

from .records import bench, process

CFG = Config({}, {}, {}, Matrix(("eager",)))


def env(python="3.11.7") -> EnvRecord:
    return EnvRecord({"python": {"implementation": "CPython", "version": python},
                      "hardware": {"cpu_model": "AMD EPYC"}, "torch": {"num_threads": 2}})


def cell(seed: int, n: int = 4, workloads=("a", "b", "c"), **kw):
    """A cell of three workloads, `n` processes each (the default matrix's shape)."""
    rng = random.Random(seed)
    return bench({w: [process(rng=rng, **kw) for _ in range(n)] for w in workloads})


def compare(now, base, env_base=None, env_now=None):
    inputs = RunInputs("HEAD", "0" * 40, {("bench", "c"): Pair(now, base)},
                       env_now or env(), env_base or env())
    return {(r.workload, r.metric): r for r in compare_run(CFG, inputs).rows}


# ---- busy processes -------------------------------------------------------------------------

def with_busy(record, readings: dict[int, dict[str, Busy]]):
    """Processes of workload "a" (by index) with busy readings per phase."""
    field = {"steady_s": "busy_machine", "first_call_s": "busy_first_call",
             "warmup_s": "busy_warmup"}
    procs = list(record.workloads["a"].processes)
    for i, phases in readings.items():
        m = dataclasses.replace(procs[i].modes["eager"],
                                **{field[k]: b for k, b in phases.items()})
        procs[i] = dataclasses.replace(procs[i], modes={"eager": m})
    return dataclasses.replace(record, workloads={
        **record.workloads, "a": dataclasses.replace(record.workloads["a"],
                                                     processes=tuple(procs))})


def test_processes_with_hypervisor_steal_are_left_out():
    quiet = Busy(0.02, 0.0)
    stolen = Busy(0.02, 0.30)
    base = with_busy(cell(1, n=5), {i: {"steady_s": quiet} for i in range(5)})
    now = with_busy(cell(2, n=5), {0: {"steady_s": stolen}, 3: {"steady_s": stolen}})
    row = compare(now, base)["a", "steady_s"]
    assert row.change.n_now == 3 and row.change.n_base == 5
    assert row.note.startswith("2 process(es) left out: other programs and hypervisor steal")
    # Others and steal together: 15 % + 15 % is more than 25 %.
    shared = with_busy(cell(2, n=5), {1: {"steady_s": Busy(0.15, 0.15)}})
    assert compare(shared, base)["a", "steady_s"].change.n_now == 4


def test_each_phase_is_judged_by_its_own_reading():
    """Steal during the compile leaves the process out of the compile's test only; a record
    that read the steady samples alone (schema 2) is judged by that reading throughout."""
    stolen = Busy(0.0, 0.5)
    now = with_busy(cell(2, n=5), {0: {"first_call_s": stolen, "steady_s": Busy(0.0, 0.0)}})
    rows = compare(now, cell(1, n=5))
    assert rows["a", "first_call_s"].change.n_now == 4
    assert rows["a", "steady_s"].change.n_now == 5
    assert rows["a", "warmup_s"].change.n_now == 5
    old = with_busy(cell(2, n=5), {0: {"steady_s": stolen}})
    rows = compare(old, cell(1, n=5))
    assert {rows["a", m].change.n_now for m in TIMED} == {4}
