"""Statistics tested like code: error rates of the whole verdict pipeline, measured.

Seeded simulations whose truth is known go through the real judge (rows,
Benjamini-Hochberg over the matrix, verdicts, minimum detectable effects) and the verdicts are
counted. A simulated matrix has CELLS cells of one workload and mode, three timed metrics each
(60 tests), PROCESSES worker processes per side. steady_s has a per-process random effect (the
unit of replication) drawn from one family, its spread growing across the cells:

  normal      process median = 1 + cv·Z, cv 1 % .. 15 %
  lognormal   exp(σ·Z), σ 1 % .. 40 %
  bimodal     processes in two modes 1.4x or 2.2x apart (a CPU training step; process CV up
              to ~40 %), the slow mode taken by 1/2 or 3/10 of them, within-mode spread 1-10 %
  heavy       log effect = s·t(2.5 df), or clean processes plus 15 % Pareto(1.5) outliers

first_call_s and warmup_s are log-normal (2-15 % and 3-25 %) in every family. The 1000-matrix
runs build the rows bench_rows would build straight from process summaries (twice as fast);
the raw-sample path (per-call samples with timer spikes, records, bench_rows and its machine
sentinel) is run for the log-normal family.

`pytest -s tests/test_stats_simulation.py` prints the measured rates.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pytest

from torchgate.core.config.settings import Delta
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import (
    BenchProcess,
    BenchRecord,
    ModeTiming,
    Sentinel,
    WorkloadRun,
)
from torchgate.core.vocabulary import UnitKey, Verdict
from torchgate.judge import stats
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import Draft, finish

from .records import with_ab

pytestmark = pytest.mark.slow     # seeded simulations: thousands of matrices judged

ALPHA, POWER = 0.05, 0.8
DELTAS = Delta(steady_s=0.05, first_call_s=0.20, warmup_s=0.25, peak_bytes=0.05)
TIMED = ("steady_s", "first_call_s", "warmup_s")
PROCESSES, SAMPLES, CELLS = 5, 12, 20
NULL_MATRICES = 1000
TARGET = CELLS // 2          # the cell that truly slows down in the power runs
BASE_S = {"steady_s": 0.01, "first_call_s": 2.0, "warmup_s": 0.3}


# ---- families: per-process factors on steady_s, and each process's latent mode ------------

def _column(values) -> np.ndarray:
    """Per-cell parameters, broadcast over (matrix, cell, side, process)."""
    return np.asarray(values, dtype=float)[:, None, None]


def _normal(rng, shape):
    return 1 + _column(np.geomspace(0.01, 0.15, CELLS)) * rng.standard_normal(shape), None


def _lognormal(rng, shape):
    return np.exp(_column(np.geomspace(0.01, 0.40, CELLS)) * rng.standard_normal(shape)), None


def _bimodal(rng, shape):
    cells = np.arange(CELLS)
    split = _column(np.where(cells < CELLS // 2, 1.4, 2.2))
    slow_share = _column(np.where(cells % 2 == 0, 0.5, 0.3))
    within = _column(np.resize(np.geomspace(0.01, 0.10, 5), CELLS))
    slow = rng.random(shape) < slow_share
    return np.exp(within * rng.standard_normal(shape)) * np.where(slow, split, 1.0), slow


def _heavy(rng, shape):
    scale = _column(np.repeat(np.geomspace(0.01, 0.15, CELLS // 2), 2))
    student = np.exp(scale * rng.standard_t(2.5, shape))
    outlier = rng.random(shape) < 0.15
    pareto = np.exp(scale * rng.standard_normal(shape)) * np.where(
        outlier, 1 + rng.pareto(1.5, shape), 1.0)
    return np.where(_column(np.arange(CELLS) % 2 == 1), pareto, student), None


FAMILIES = {"normal": _normal, "lognormal": _lognormal, "bimodal": _bimodal, "heavy": _heavy}


def _phases(rng, shape):
    """first_call_s and warmup_s process values."""
    first = np.exp(_column(np.geomspace(0.15, 0.02, CELLS)) * rng.standard_normal(shape))
    warm = np.exp(_column(np.geomspace(0.03, 0.25, CELLS)) * rng.standard_normal(shape))
    return first * BASE_S["first_call_s"], warm * BASE_S["warmup_s"]


def _raw_samples(rng, medians):
    """Per-call samples around each process's median: 3 % noise, 5 % of calls a 2-5x spike."""
    shape = medians.shape + (SAMPLES,)
    spikes = np.where(rng.random(shape) < 0.05, rng.uniform(2, 5, shape), 1.0)
    return medians[..., None] * np.exp(0.03 * rng.standard_normal(shape)) * spikes


# ---- the pipeline under test ------------------------------------------------------------------

def _record(steady, first, warm, sentinel) -> BenchRecord:
    """A bench record of one cell and side; `steady` holds per-call samples per process."""
    processes = [BenchProcess("OK", sentinel=Sentinel(s), round=i, modes={"eager": ModeTiming(
        "OK", steady_s=tuple(st), first_call_s=f, warmup_s=w, peak_bytes=1 << 20)})
        for i, (st, f, w, s) in enumerate(zip(steady, first, warm, sentinel))]
    return BenchRecord("c", "OK", modes=("eager",), workloads={"w": WorkloadRun(tuple(processes))})


def _compare_records(steady, first, warm, sentinel) -> CompareRecord:
    """One matrix through bench_rows + finish; arguments are indexed [cell][side][process]."""
    drafts = []
    for cell in range(CELLS):
        base, now = (_record(steady[cell][k], first[cell][k], warm[cell][k], sentinel[cell][k])
                     for k in (0, 1))
        drafts += bench_rows(f"c{cell}", now, base, DELTAS)
    return finish(drafts, alpha=ALPHA, power=POWER, plan=_read_plan)


def _compare_summaries(steady, first, warm) -> CompareRecord:
    """One matrix from process summaries: the timed rows bench_rows would build, + finish."""
    drafts = []
    for cell in range(CELLS):
        for metric, values in zip(TIMED, (steady, first, warm)):
            base, now = values[cell]
            drafts.append(Draft(UnitKey("bench", f"c{cell}", "w", "eager", metric), Verdict.INCONCLUSIVE,
                                shift=stats.shift(base, now), delta=getattr(DELTAS, metric)))
    return finish(drafts, alpha=ALPHA, power=POWER, plan=_read_plan)


def _read_plan(row) -> bool:
    """Planning figures for the one row whose MDE is read, TARGET's steady_s: they never
    change a verdict, and planning every row was most of the cost of a matrix."""
    return row.cell == f"c{TARGET}" and row.metric == "steady_s"


# ---- counting -----------------------------------------------------------------------------

@dataclass
class Counts:
    """Verdicts over simulated matrices. Null rows: all but the slowed cells' steady_s."""
    matrices: int = 0
    any_regressed: int = 0           # matrices with a null row REGRESSED
    any_improved: int = 0            # ... IMPROVED
    any_significant: int = 0         # ... BH-significant (either sign, any size)
    null_steady: int = 0             # null steady_s rows
    steady_regressed: int = 0        # ... REGRESSED
    steady_regressed_split: int = 0  # ... of them with processes split by side into two modes
    slowed_rows: int = 0             # steady_s rows of slowed cells
    slowed_regressed: int = 0
    slowed_wrong: int = 0            # ... EQUIVALENT or IMPROVED
    slowed_wrong_split: int = 0      # ... of them with processes split by side into two modes
    target_mde: list = field(default_factory=list)    # reported MDE of TARGET's steady_s

    def rate(self, part: str, whole: str = "matrices") -> float:
        return getattr(self, part) / getattr(self, whole)


def simulate(family: str, matrices: int, seed: int, *, slowdown: float = 1.0,
             slowed: tuple[int, ...] = (), processes: int = PROCESSES,
             raw: bool = False) -> Counts:
    """Verdict counts over `matrices` simulated comparisons: the now side of the `slowed`
    cells' steady_s is `slowdown` times slower; every other cell and metric is A/A. `raw`:
    per-call samples in bench records through bench_rows, else process summaries."""
    rng = np.random.default_rng(seed)
    shape = (matrices, CELLS, 2, processes)
    factors, modes = FAMILIES[family](rng, shape)
    factors[:, list(slowed), 1] *= slowdown
    steady = BASE_S["steady_s"] * factors
    first, warm = (a.tolist() for a in _phases(rng, shape))
    if raw:
        samples = _raw_samples(rng, steady).tolist()
        # A steady machine whose sentinel passes its equivalence test (tests/test_guards.py
        # measures that test at a shared VM's noise); the timings are what is simulated here.
        sentinel = (0.02 * np.exp(0.004 * rng.standard_normal(shape))).tolist()
        results = (_compare_records(samples[m], first[m], warm[m], sentinel[m])
                   for m in range(matrices))
    else:
        steady = steady.tolist()
        results = (_compare_summaries(steady[m], first[m], warm[m]) for m in range(matrices))
    counts = Counts()
    for m, result in enumerate(results):
        assert result.tests == 3 * CELLS, "every timed row is tested"
        _count(counts, result, set(slowed), None if modes is None else modes[m])
    return counts


def _count(counts: Counts, result: CompareRecord, slowed: set[int],
           modes: np.ndarray | None) -> None:
    def split(cell: int) -> bool:
        return modes is not None and _split_by_side(modes[cell])

    regressed = improved = significant = False
    for row in result.rows:
        cell = int(row.cell[1:])
        if row.metric == "steady_s" and cell in slowed:
            counts.slowed_rows += 1
            counts.slowed_regressed += row.verdict == Verdict.REGRESSED
            wrong = row.verdict in (Verdict.EQUIVALENT, Verdict.IMPROVED)
            counts.slowed_wrong += wrong
            counts.slowed_wrong_split += wrong and split(cell)
            continue
        if row.metric == "steady_s":
            counts.null_steady += 1
            counts.steady_regressed += row.verdict == Verdict.REGRESSED
            counts.steady_regressed_split += row.verdict == Verdict.REGRESSED and split(cell)
            if cell == TARGET:
                counts.target_mde.append(row.change.mde)
        regressed |= row.verdict == Verdict.REGRESSED
        improved |= row.verdict == Verdict.IMPROVED
        significant |= row.change is not None and row.change.p_adjusted is not None \
            and row.change.p_adjusted <= ALPHA
    counts.matrices += 1
    counts.any_regressed += regressed
    counts.any_improved += improved
    counts.any_significant += significant


def _split_by_side(modes: np.ndarray) -> bool:
    """All base processes in one mode and all now processes in the other."""
    base, now = modes
    return bool(base.all() != now.any() and base.all() == base.any()
                and now.all() == now.any())


@functools.cache
def null_run(family: str, raw: bool) -> Counts:
    """A/A matrices, shared by the tests of a family (300 through the slower raw path)."""
    return simulate(family, 300 if raw else NULL_MATRICES, seed=1, raw=raw)


def reported_mde(family: str, raw: bool) -> float:
    """The MDE the pipeline reports for TARGET's steady_s, median over the null matrices."""
    return float(np.median(null_run(family, raw).target_mde))


def _show(label: str, **rates) -> None:
    print(f"\n{label}: " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                                     for k, v in rates.items()))


# ---- acceptance ---------------------------------------------------------------------------

def _check_null(c: Counts, label: str, mde: float) -> None:
    _show(f"A/A {label}, {c.matrices} matrices x {CELLS} cells",
          any_regressed=c.rate("any_regressed"), any_improved=c.rate("any_improved"),
          any_bh_significant=c.rate("any_significant"),
          steady_rows_regressed=f"{c.steady_regressed}/{c.null_steady}",
          median_mde_of_target=mde)
    assert c.rate("any_regressed") <= ALPHA
    assert c.rate("any_improved") <= ALPHA


def _check_power(c: Counts, label: str) -> None:
    _show(label, power=c.rate("slowed_regressed", "slowed_rows"),
          other_rows_any_regressed=c.rate("any_regressed"))
    assert c.rate("slowed_regressed", "slowed_rows") >= 0.8
    assert c.rate("any_regressed") <= ALPHA


@pytest.mark.parametrize("family", FAMILIES)
def test_a_a_matrices_rarely_regress(family):
    """Same code twice: a matrix with any false REGRESSED at most alpha of the time."""
    c = null_run(family, False)
    assert c.matrices >= 1000
    _check_null(c, family, reported_mde(family, False))


@pytest.mark.parametrize("family", FAMILIES)
def test_slowdown_of_twice_the_reported_mde_is_regressed(family):
    mde = reported_mde(family, False)
    c = simulate(family, 150, seed=2, slowdown=1 + 2 * mde, slowed=(TARGET,))
    _check_power(c, f"{family}: slowdown 2 x MDE ({2 * mde:+.1%}) in cell {TARGET}")


def test_raw_samples_through_bench_rows():
    """The same acceptance through bench records of per-call samples with timer spikes."""
    c = null_run("lognormal", True)
    mde = reported_mde("lognormal", True)
    _check_null(c, "lognormal, raw samples", mde)
    power = simulate("lognormal", 100, seed=2, slowdown=1 + 2 * mde, slowed=(TARGET,),
                     raw=True)
    _check_power(power, f"lognormal, raw samples: slowdown 2 x MDE ({2 * mde:+.1%})")


def test_reported_mde_has_the_power_it_claims():
    """At 1 x the reported MDE (median over null runs) a slowdown is REGRESSED ~80 % of the
    time: the MDE is neither a bluff nor needlessly wide."""
    mde = reported_mde("normal", False)
    c = simulate("normal", 400, seed=3, slowdown=1 + mde, slowed=(TARGET,))
    power = c.rate("slowed_regressed", "slowed_rows")
    _show(f"normal: slowdown 1 x MDE ({mde:+.1%})", power=power)
    assert 0.72 <= power <= 0.88


@pytest.mark.parametrize("family", FAMILIES)
def test_ten_percent_slowdown_is_almost_never_equivalent_or_improved(family):
    """steady_s (δ 5 %) 10 % slower in every cell. EQUIVALENT is the two one-sided tests at
    alpha, each unit on its own: at a true change of δ it may be wrong in alpha of the units,
    at 2·δ in far fewer. Besides, a bimodal cell whose base processes all landed in the slow
    mode and now processes in the fast one (a chance of π^5(1-π)^5 ≤ 2^-10) reads as
    IMPROVED, see the test below."""
    c = simulate(family, 50, seed=4, slowdown=1.10, slowed=tuple(range(CELLS)))
    _show(f"{family}: 10 % slowdown in all {c.slowed_rows} steady_s rows",
          equivalent_or_improved=c.slowed_wrong, of_them_split_by_side=c.slowed_wrong_split,
          regressed=c.rate("slowed_regressed", "slowed_rows"))
    assert c.slowed_wrong - c.slowed_wrong_split <= 0.002 * c.slowed_rows
    assert c.rate("slowed_wrong_split", "slowed_rows") <= 4 * 2 ** -10


def test_bimodal_cells_regress_in_a_a_mostly_when_their_modes_split_by_side():
    """With 5 processes a side a bimodal cell's steady_s comes out REGRESSED in A/A only when
    every base process landed in the fast mode and every now process in the slow one (chance
    π^5(1-π)^5 ≤ 2^-10): data no test can tell from a real slowdown of a quiet cell. With 10
    processes a side the rate falls to what Benjamini-Hochberg allows any single null test,
    alpha / (2 tests) for one direction."""
    c = null_run("bimodal", False)
    more = simulate("bimodal", 400, seed=5, processes=10)
    nominal = ALPHA / (2 * 3 * CELLS)
    _show("A/A bimodal steady_s", regressed=f"{c.steady_regressed}/{c.null_steady}",
          of_them_split_by_side=c.steady_regressed_split,
          with_10_processes=f"{more.steady_regressed}/{more.null_steady}",
          nominal_rate=nominal)
    # Beyond the split cells, no more than any single null test may give.
    assert c.steady_regressed - c.steady_regressed_split <= nominal * c.null_steady
    assert c.rate("steady_regressed", "null_steady") <= 1.5 * 2 ** -10
    assert more.rate("steady_regressed", "null_steady") <= 1.5 * nominal


# ---- interleaved A/B: lock-step pairs -----------------------------------------------------
#
# Each round runs one process per arm at once, taking turns sample by sample, so the two
# processes of a pair share the machine's speed of the moment: here a per-pair factor with a
# 30 % spread (this VM's speed swings), common to both arms, times each process's own effect
# (0.5 % .. 5 % across the cells). A Welch test sees the 30 %; the paired test should not.

def simulate_pairs(matrices: int, seed: int, *, slowdown: float = 1.0,
                   slowed: tuple[int, ...] = ()) -> Counts:
    counts = Counts()
    for m in range(matrices):
        cells = _pair_values(np.random.default_rng([seed, m]), slowdown, slowed)
        drafts = []
        for cell in range(CELLS):
            base, now = _ab_arms(*cells[cell])
            drafts += bench_rows(f"c{cell}", with_ab(now, base, True), base, DELTAS, paired=True)
        result = finish(drafts, alpha=ALPHA, power=POWER, plan=_read_plan)
        assert result.tests == 3 * CELLS and all(
            r.change.paired for r in result.rows if r.change is not None)
        _count(counts, result, set(slowed), None)
    return counts


def _pair_values(rng, slowdown: float = 1.0, slowed: tuple[int, ...] = ()) -> list:
    """One matrix: per cell, (steady, first, warm) values indexed [side][process]."""
    shape = (1, CELLS, 2, PROCESSES)
    machine = np.exp(0.30 * rng.standard_normal((1, CELLS, 1, PROCESSES)))
    own = np.exp(_column(np.geomspace(0.005, 0.05, CELLS)) * rng.standard_normal(shape))
    factors = machine * own
    factors[:, list(slowed), 1] *= slowdown
    steady = BASE_S["steady_s"] * factors
    first, warm = _phases(rng, shape)
    return [(steady[0, c], first[0, c], warm[0, c]) for c in range(CELLS)]


def _ab_arms(steady, first, warm) -> tuple[BenchRecord, BenchRecord]:
    """The two arms of an interleaved A/B cell; arguments are indexed [side][process], a
    process's index is its round."""
    return tuple(_record([[float(s)] for s in steady[k]], first[k].tolist(), warm[k].tolist(),
                         [0.02] * PROCESSES) for k in (0, 1))


def _welch_mde_of_target(seed: int, matrices: int = 50) -> float:
    """The MDE that Welch's test, blind to the pairing, reports for TARGET's steady_s."""
    mdes = []
    for m in range(matrices):
        base, now = _ab_arms(*_pair_values(np.random.default_rng([seed, m]), 1)[TARGET])
        steady = next(d for d in bench_rows("c", with_ab(now, base), base, DELTAS)
                      if d.metric == "steady_s")
        # The same number of tests as a matrix has, for a like-for-like level.
        mdes.append(stats.minimum_detectable_effect(steady.shift, alpha=ALPHA, power=POWER,
                                                    delta=DELTAS.steady_s, tests=3 * CELLS))
    return float(np.median(mdes))


@functools.cache
def null_pairs() -> Counts:
    return simulate_pairs(NULL_MATRICES, seed=6)


def test_interleaved_pairs_a_a_and_power():
    """Through A/B records, bench_rows and the paired test: false alarms at most alpha over
    1000 matrices, and 2 x the reported MDE detected in 80 %, although the machine's speed
    moves 30 % from pair to pair."""
    c = null_pairs()
    mde = float(np.median(c.target_mde))
    _check_null(c, "interleaved A/B pairs, machine spread 30 %", mde)
    welch = _welch_mde_of_target(seed=6)
    _show("the same pairs through Welch's test", median_mde_of_target=welch)
    assert mde < welch / 4   # the 30 % swings cancel in pairs
    power = simulate_pairs(150, seed=7, slowdown=1 + 2 * mde, slowed=(TARGET,))
    _check_power(power, f"interleaved A/B pairs: slowdown 2 x MDE ({2 * mde:+.1%})")
    ten = simulate_pairs(50, seed=8, slowdown=1.10, slowed=tuple(range(CELLS)))
    _show("interleaved A/B pairs: 10 % slowdown in every cell",
          regressed=ten.rate("slowed_regressed", "slowed_rows"), wrong=ten.slowed_wrong)
    assert ten.slowed_wrong == 0
