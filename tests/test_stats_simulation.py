"""Statistics tested like code: error rates of the whole verdict pipeline, measured.

Seeded simulations whose truth is known go through the real `comparison` functions (rows,
Benjamini-Hochberg over the matrix, verdicts, minimum detectable effects) and the verdicts are
counted. Each simulated matrix has CELLS cells, one workload and mode each, three timed metrics
(60 tests), PROCESSES worker processes per side, and a per-process random effect (the unit of
replication) drawn from one family of distributions:

  normal      process median = 1 + cv·Z, cv 1 % .. 15 %
  lognormal   exp(σ·Z), σ 1 % .. 40 %; raw per-call samples with timer spikes, through
              comparison.bench_rows (the raw-sample path)
  bimodal     two modes 1.4x or 2.2x apart (a CPU training step), within-mode spread 1 % .. 10 %
  heavy       Student t (2.5 df) on the log scale, or clean processes plus 15 % Pareto outliers

Run `pytest -s tests/test_stats_simulation.py` to see the measured rates.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pytest

from stages import comparison, stats

ALPHA, POWER = 0.05, 0.8
DELTAS = {"steady_s": 0.05, "first_call_s": 0.20, "warmup_s": 0.25, "peak_bytes": 0.05}
TIMED = ("steady_s", "first_call_s", "warmup_s")
PROCESSES, SAMPLES, CELLS = 5, 12, 20
NULL_MATRICES = 1000
SHIFT_MATRICES = 200
TARGET = CELLS // 2          # the cell that truly slows down in the power runs
BASE_S = {"steady_s": 0.01, "first_call_s": 2.0, "warmup_s": 0.3}


# ---- families: per-process summaries of steady_s, as factors of the cell's true time ---------

def _normal(rng, shape):
    cv = np.geomspace(0.01, 0.15, CELLS)[:, None, None]
    return 1 + cv * rng.standard_normal(shape)


def _lognormal(rng, shape):
    sigma = np.geomspace(0.01, 0.40, CELLS)[:, None, None]
    return np.exp(sigma * rng.standard_normal(shape))


def _bimodal(rng, shape):
    """Half the cells split 1.4x, half 2.2x (process CV ~40 %); the slow mode is taken by half or
    a third of the processes; within a mode the spread is 1 % .. 10 %."""
    cells = np.arange(CELLS)
    split = np.where(cells < CELLS // 2, 1.4, 2.2)[:, None, None]
    slow_share = np.where(cells % 2 == 0, 0.5, 0.3)[:, None, None]
    within = np.tile(np.geomspace(0.01, 0.10, 5), CELLS // 5 + 1)[:CELLS][:, None, None]
    slow = rng.random(shape) < slow_share
    return np.exp(within * rng.standard_normal(shape)) * np.where(slow, split, 1.0)


def _heavy(rng, shape):
    """Even cells: log effect = s·t(2.5 df); odd cells: clean processes, 15 % of them outliers
    slowed by a Pareto(1.5) factor (1x .. 10x and beyond)."""
    scale = np.repeat(np.geomspace(0.01, 0.15, CELLS // 2), 2)[:, None, None]
    student = np.exp(scale * rng.standard_t(2.5, shape))
    outlier = rng.random(shape) < 0.15
    pareto = np.exp(scale * rng.standard_normal(shape)) * np.where(
        outlier, 1 + rng.pareto(1.5, shape), 1.0)
    return np.where((np.arange(CELLS) % 2 == 1)[:, None, None], pareto, student)


FAMILIES = {"normal": _normal, "lognormal": _lognormal, "bimodal": _bimodal, "heavy": _heavy}
RAW_FAMILY = "lognormal"


def _phases(rng, matrices):
    """first_call_s and warmup_s summaries: log-normal, 2 % .. 15 % and 3 % .. 25 %."""
    shape = (matrices, CELLS, 2, PROCESSES)
    first = np.exp(np.geomspace(0.02, 0.15, CELLS)[::-1, None, None] * rng.standard_normal(shape))
    warm = np.exp(np.geomspace(0.03, 0.25, CELLS)[:, None, None] * rng.standard_normal(shape))
    return first * BASE_S["first_call_s"], warm * BASE_S["warmup_s"]


def _raw_samples(rng, factors):
    """Per-call samples around each process median: 3 % noise, 5 % of calls a 2-5x spike."""
    shape = factors.shape + (SAMPLES,)
    spikes = np.where(rng.random(shape) < 0.05, rng.uniform(2, 5, shape), 1.0)
    return factors[..., None] * np.exp(0.03 * rng.standard_normal(shape)) * spikes


# ---- the pipeline under test ------------------------------------------------------------------

def _record(steady, first, warm, sentinel):
    """A bench record of one cell and side; `steady` holds per-call samples per process."""
    processes = [{"status": "OK", "sentinel": {"python_loop_s": s},
                  "modes": {"eager": {"status": "OK", "steady_s": st, "first_call_s": f,
                                      "warmup_s": w, "peak_bytes": 1 << 20}}}
                 for st, f, w, s in zip(steady, first, warm, sentinel)]
    return {"status": "OK", "modes": ["eager"], "workloads": {"w": {"processes": processes}}}


def _compare_records(steady, first, warm, sentinel) -> comparison.Comparison:
    """One matrix through bench_rows + finish; arrays are indexed [cell][side][process]."""
    result = comparison.Comparison()
    for cell in range(CELLS):
        base, now = (_record(steady[cell][k], first[cell][k], warm[cell][k], sentinel[cell][k])
                     for k in (0, 1))
        result.rows.extend(comparison.bench_rows(f"c{cell}", now, base, DELTAS))
    return comparison.finish(result, ALPHA, POWER)


def _compare_summaries(steady, first, warm) -> comparison.Comparison:
    """One matrix from process summaries: the rows bench_rows builds for timed metrics."""
    result = comparison.Comparison()
    for cell in range(CELLS):
        for metric, values in zip(TIMED, (steady, first, warm)):
            base, now = values[cell]
            result.rows.append(comparison.Row(
                "bench", f"c{cell}", "w", "eager", metric, stats.INCONCLUSIVE,
                shift=stats.shift(base, now), delta=DELTAS[metric]))
    return comparison.finish(result, ALPHA, POWER)


@dataclass
class Counts:
    """Verdict counts over simulated matrices."""
    matrices: int = 0
    any_regressed: int = 0           # matrices with a REGRESSED row outside the slowed cells
    any_significant: int = 0         # ... with a BH-significant row outside the slowed cells
    target_regressed: int = 0        # slowed steady_s rows that came out REGRESSED
    target_rows: int = 0
    target_wrong: int = 0            # slowed steady_s rows that came out EQUIVALENT or IMPROVED
    cells_regressed: int = 0         # (cell, matrix) pairs with a REGRESSED row, null cells only
    cell_trials: int = 0
    target_mde: list = None

    def rate(self, name: str, of: str = "matrices") -> float:
        return getattr(self, name) / max(getattr(self, of), 1)


def simulate(family: str, matrices: int, seed: int, slowdown: float = 1.0,
             slowed: tuple[int, ...] = (), raw: bool = False) -> Counts:
    """Simulate `matrices` comparisons; the now side of the `slowed` cells' steady_s is
    `slowdown` times slower, every other cell and metric is an A/A comparison."""
    rng = np.random.default_rng(seed)
    shape = (matrices, CELLS, 2, PROCESSES)
    factors = FAMILIES[family](rng, shape)
    factors[:, list(slowed), 1] *= slowdown
    steady = BASE_S["steady_s"] * factors
    first, warm = _phases(rng, matrices)
    counts = Counts(target_mde=[])
    if raw:
        samples = _raw_samples(rng, steady).tolist()
        sentinel = (0.02 * np.exp(0.01 * rng.standard_normal(shape))).tolist()
    steady, first, warm = steady.tolist(), first.tolist(), warm.tolist()
    for m in range(matrices):
        result = (_compare_records(samples[m], first[m], warm[m], sentinel[m]) if raw else
                  _compare_summaries(steady[m], first[m], warm[m]))
        _count(counts, result, slowed)
    return counts


def _count(counts: Counts, result: comparison.Comparison, slowed: tuple[int, ...]) -> None:
    counts.matrices += 1
    slowed_cells = {f"c{c}" for c in slowed}
    regressed_cells = set()
    significant = False
    for row in result.rows:
        if row.cell in slowed_cells and row.metric == "steady_s":
            counts.target_rows += 1
            counts.target_regressed += row.verdict == stats.REGRESSED
            counts.target_wrong += row.verdict in (stats.EQUIVALENT, stats.IMPROVED)
            continue
        if row.cell == f"c{TARGET}" and row.metric == "steady_s":
            counts.target_mde.append(row.mde)
        if row.verdict == stats.REGRESSED:
            regressed_cells.add(row.cell)
        significant |= row.p_adjusted is not None and row.p_adjusted <= ALPHA
    counts.any_regressed += bool(regressed_cells)
    counts.any_significant += significant
    counts.cells_regressed += len(regressed_cells)
    counts.cell_trials += CELLS - len(slowed_cells)


if __name__ == "__main__":
    import sys
    import time
    fam = sys.argv[1]
    t = time.perf_counter()
    c = simulate(fam, int(sys.argv[2]), 1, raw=len(sys.argv) > 3)
    print(fam, c.rate("any_regressed"), c.rate("any_significant"),
          c.rate("cells_regressed", "cell_trials"), np.median(c.target_mde),
          time.perf_counter() - t)
