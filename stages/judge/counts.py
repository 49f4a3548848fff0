"""A count that repeats closely but not exactly (host instructions), tested like a timing.

Each counts process draws the layout it runs in (measure.callgrind.drawn_layout): where its
stack and heap start. The same code then counts apart by a spread that shrinks with the
count's size, measured with the shipped counts worker (reports/README.md): SDs of 0.52 % at
66 k instructions a call, 0.23 % at 640 k, 0.10 % at 11.4 M, eager and compiled alike or
less. So a unit's counts processes are samples of its layouts, and a change is tested on
their logs: the difference of the sides' means over its standard error, whose variance is
the sides' own spread pooled with what a count of this size is known to spread
(`prior_spread`, worth PRIOR_DF processes): with one process a side the prior is all there
is, with more the unit speaks for itself, a unit that spreads more than the prior wins.

The test joins the run's Holm family beside the timings and is decided like them
(stats.verdict): REGRESSED or IMPROVED where significant and beyond δ
(stats.delta.instructions), EQUIVALENT where its interval lies within ±δ, INCONCLUSIVE
between. An undecided count is counted again, up to bench.instruction_processes processes a
side, a number fixed in advance, so the first process a side and all of them are two
looks, each tested at α/2 (`looks`): whichever decides, no more than α of unchanged units
are REGRESSED. tests/test_instructions.py measures its false alarms and power.
"""
from __future__ import annotations

import math
from typing import Sequence

from torchgate.core.metrics import Metric, Parts
from torchgate.core.numbers import geometric_mean, median
from torchgate.core.records.rows import Contribution
from torchgate.core.records.schema import Spent
from torchgate.core.vocabulary import REST, UnitKey, Verdict
from torchgate.judge import stats
from torchgate.judge.verdicts import Draft

# Worth three processes. With one process a side the prior is all the test has, and t's tails
# at its degrees of freedom keep a unit that spreads more than the prior from false alarms
# (100 layers of 32 spread 0.29 % eager at 5.35 M a call, 1.5 times the prior: 6 % of such
# A/A checks REGRESSED or IMPROVED at six, 1.6 % at three); fewer, and the first look decides
# little (at two, t's quantile at a 9-test run's first Holm step is 20: +5 % at 5 M a call
# waits for more processes); with four a side the unit's own spread outweighs it.
PRIOR_DF = 3


def prior_spread(metric: Metric, count: float) -> float:
    """The relative SD of one count of this size over drawn layouts: `metric.layout_noise`'s
    (relative, per √instructions) parts, 1.3 times a fit of the SDs measured at 66 k-11.4 M
    (core.metrics)."""
    relative, root = metric.layout_noise
    return relative + root / math.sqrt(count) if count > 0 else math.inf


def looks(processes: int) -> int:
    """Looks at a count: the first process a side, and the fixed number it grows to."""
    return 2 if processes > 1 else 1


def count_shift(metric: Metric, base: Sequence[float], now: Sequence[float]
                ) -> stats.Shift | None:
    """The t-test of log(now / base) on each side's mean over its counts processes; None
    where a count is not a positive finite number."""
    values = (*base, *now)
    if not base or not now or min(values) <= 0 or not math.isfinite(sum(values)):
        return None
    x, y = [math.log(v) for v in base], [math.log(v) for v in now]
    (mx, sx), (my, sy) = stats.mean_and_squares(x), stats.mean_and_squares(y)
    own = len(x) + len(y) - 2
    variance = (PRIOR_DF * prior_spread(metric, min(values)) ** 2 + sx + sy) / (PRIOR_DF + own)
    # The pooled variance has PRIOR_DF + own degrees of freedom. Each side's part is lent
    # what makes Satterthwaite's sum of the two give exactly that (1 against 4 processes: 2.3
    # instead of 6 with the prior split evenly), so that planning at more processes plans
    # this test too.
    a, b = 1 / len(x), 1 / len(y)
    each = (PRIOR_DF + own) * (a * a + b * b) / (a + b) ** 2
    parts = tuple(stats.Part(side, variance, max(each - (n - 1), 0.0))
                  for side, n in (("base", len(x)), ("now", len(y))))
    return stats.with_parts(len(x), len(y), my - mx, math.sqrt(variance), parts)


MARGIN_SDS = 1.5      # a margin no closer than this to one count's layout spread


def margin(metric: Metric, delta: float, count: float) -> float:
    """The smallest change of this count that is REGRESSED and the bound of its EQUIVALENT:
    δ, and never less than 1.5 layout SDs of one count of its size (`prior_spread`), so
    that bound can be shown with a few processes a side: 0.5 % from 1 M a call, 0.9 % at
    93 k."""
    return max(delta, MARGIN_SDS * prior_spread(metric, count))


def count_draft(key: UnitKey, metric: Metric, base: Sequence[float], now: Sequence[float],
                delta: float, processes: int, same: bool = False,
                attribution: tuple[Contribution, ...] = ()) -> Draft:
    """A count's row before the run-wide decision: tested (INCONCLUSIVE until `finish`
    decides it, at α/looks, against `margin`), or EQUIVALENT outright where both sides are
    the same counts processes (`same`: one count of the same inputs, shared or carried)."""
    shown = dict(base=geometric_mean(base), now=geometric_mean(now))
    delta = margin(metric, delta, min(*base, *now))
    if same:
        return Draft(key, Verdict.EQUIVALENT, delta=delta,
                     note="the same inputs on both sides: counted once", **shown)
    shift = count_shift(metric, base, now)
    return Draft(key, Verdict.INCONCLUSIVE, shift=shift, delta=delta, looks=looks(processes),
                 note=f"{len(base)} and {len(now)} counts processes, each in a layout of its own",
                 attribution=attribution, **shown)


# ---- where a count went ----------------------------------------------------------------------
FUNCTIONS_SHOWN, LIBRARIES_SHOWN = 6, 3


def where_it_went(base: Sequence[Sequence[Spent]], now: Sequence[Sequence[Spent]]
                  ) -> tuple[Contribution, ...]:
    """The functions whose own instructions per call moved most between the sides, then the
    libraries', the largest change first: each side's value the median over its counts
    processes (measure.callgrind.spent). A function a process did not keep (under 0.1 % of its
    count) is 0 there: a bound of 0.1 % of the count per function. Empty where a side kept
    none (a record from before the counts kept their functions). A library's smaller
    functions (REST) count toward the library, never as a function."""
    if not any(base) or not any(now):
        return ()
    sides = [_medians(side, lambda s: (s.function, s.library)) for side in (base, now)]
    libraries = [_medians(side, lambda s: s.library) for side in (base, now)]
    functions = sorted(((f, lib, sides[0].get((f, lib), 0.0), sides[1].get((f, lib), 0.0))
                        for f, lib in sides[0].keys() | sides[1].keys() if f != REST),
                       key=lambda x: (-abs(x[3] - x[2]), x[0], x[1]))
    found = [Contribution(f, Parts.FUNCTIONS, b, n, lib) for f, lib, b, n in functions
             [:FUNCTIONS_SHOWN] if n != b]
    moved = sorted(((lib, libraries[0].get(lib, 0.0), libraries[1].get(lib, 0.0))
                    for lib in libraries[0].keys() | libraries[1].keys()),
                   key=lambda x: (-abs(x[2] - x[1]), x[0]))
    return (*found, *(Contribution(lib, "library", b, n) for lib, b, n in moved
                      [:LIBRARIES_SHOWN] if n != b))


def _medians(processes: Sequence[Sequence[Spent]], key) -> dict:
    """Per key, the median over the processes of its instructions (0 where a process kept
    none of it)."""
    sums: list[dict] = []
    for spent in processes:
        mine: dict = {}
        for s in spent:
            mine[key(s)] = mine.get(key(s), 0) + s.instructions
        sums.append(mine)
    keys = set().union(*sums)
    return {k: float(median([mine.get(k, 0) for mine in sums])) for k in keys}
