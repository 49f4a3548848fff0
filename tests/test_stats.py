"""Known answers for torchgate.stats: the test, the adjustment, the verdict rule, the planning."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from torchgate.core.numbers import median
from torchgate.core.vocabulary import Verdict
from torchgate.judge import stats

ALPHA, POWER = 0.05, 0.8


def lognormal(rng, n, ratio=1.0, sigma=0.1, size=None):
    shape = (n,) if size is None else (size, n)
    return ratio * np.exp(sigma * rng.standard_normal(shape))


def median_spread(sigma, n1, n2):
    """The pooled spread a typical run reports when the truth is sigma (its median)."""
    df = n1 + n2 - 2
    return sigma * math.sqrt(sps.chi2.median(df) / df)


def make_shift(log_ratio=0.0, spread=0.1, n_base=5, n_now=5, p_value=None):
    se = spread * math.sqrt(1 / n_base + 1 / n_now)
    df = n_base + n_now - 2
    if p_value is None:
        p_value = 2 * sps.t.sf(abs(log_ratio) / se, df) if se else float(log_ratio == 0)
    return stats.Shift(n_base, n_now, log_ratio, se, float(df), spread, p_value)


# ---- shift -----------------------------------------------------------------------------------

@pytest.mark.parametrize("n_base,n_now,sigma_now", [(5, 5, 0.1), (3, 8, 0.3), (12, 4, 0.02)])
def test_shift_is_welch_t_test_on_logs(n_base, n_now, sigma_now):
    rng = np.random.default_rng(n_base * 100 + n_now)
    base, now = lognormal(rng, n_base), lognormal(rng, n_now, 1.2, sigma_now)
    s = stats.shift(base.tolist(), now.tolist())
    ref = sps.ttest_ind(np.log(now), np.log(base), equal_var=False)
    assert s.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert s.log_ratio == pytest.approx(np.log(now).mean() - np.log(base).mean())
    assert s.ratio == pytest.approx(math.exp(s.log_ratio))
    assert s.df == pytest.approx(ref.df, rel=1e-9)
    assert (s.n_base, s.n_now) == (n_base, n_now)
    low, high = ref.confidence_interval(0.95)
    assert s.interval(0.05) == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)


def test_spread_is_the_pooled_sd_of_logs():
    base, now = [1.0, 2.0, 4.0], [2.0, 2.0]
    s = stats.shift(base, now)
    pooled = (np.var(np.log(base), ddof=1) * 2 + 0) / 3
    assert s.spread == pytest.approx(math.sqrt(pooled))


def test_interval_covers_the_true_ratio():
    """The 95 % interval holds the true ratio in ~95 % of runs (Welch is a bit conservative)."""
    rng = np.random.default_rng(0)
    truth = 1.07
    covered = []
    for _ in range(2000):
        s = stats.shift(lognormal(rng, 5, sigma=0.05).tolist(),
                        lognormal(rng, 5, truth, 0.05).tolist())
        low, high = s.interval(0.05)
        covered.append(low <= truth <= high)
    assert 0.94 <= np.mean(covered) <= 0.975


def test_p_value_is_uniform_under_no_change():
    rng = np.random.default_rng(1)
    p = [stats.shift(lognormal(rng, 5).tolist(), lognormal(rng, 5).tolist()).p_value
         for _ in range(2000)]
    assert 0.03 <= np.mean(np.array(p) <= 0.05) <= 0.06


@pytest.mark.parametrize("base,now", [([1.0], [1.0, 2.0]), ([1.0, 2.0], [3.0]), ([], []),
                                      ([1.0, 0.0], [1.0, 2.0]), ([1.0, 2.0], [-1.0, 2.0]),
                                      ([1.0, math.nan], [1.0, 2.0]),
                                      ([1.0, 2.0], [math.inf, 2.0])])
def test_shift_needs_two_positive_finite_values_a_side(base, now):
    assert stats.shift(base, now) is None


def test_zero_variance():
    same = stats.shift([0.01] * 5, [0.01] * 5)
    assert (same.log_ratio, same.se, same.spread, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert same.interval(0.05) == (1.0, 1.0)
    assert stats.verdict(same, 1.0, alpha=ALPHA, delta=0.05) == Verdict.EQUIVALENT
    assert stats.minimum_detectable_effect(same, alpha=ALPHA, power=POWER, delta=0.05,
                                           tests=10) == 0.05
    assert stats.processes_needed(same, alpha=ALPHA, power=POWER, delta=0.05, tests=10) is None

    moved = stats.shift([0.01] * 5, [0.02] * 5)
    assert moved.p_value == 0.0 and moved.ratio == pytest.approx(2.0)
    assert stats.verdict(moved, 0.0, alpha=ALPHA, delta=0.05) == Verdict.REGRESSED

    one_side = stats.shift([0.01] * 5, [0.010, 0.011, 0.012, 0.010, 0.011])
    assert one_side.se > 0 and one_side.df == pytest.approx(4.0)


# ---- verdict ---------------------------------------------------------------------------------

@pytest.mark.parametrize("log_ratio,spread,p_adjusted,expected", [
    (math.log(1.30), 0.05, 0.001, Verdict.REGRESSED),     # significant and beyond +δ
    (math.log(0.70), 0.05, 0.001, Verdict.IMPROVED),      # significant and beyond -δ
    (math.log(1.01), 0.01, 0.30, Verdict.EQUIVALENT),     # interval inside ±δ
    (math.log(1.03), 0.005, 0.0001, Verdict.EQUIVALENT),  # real but smaller than δ
    (math.log(1.30), 0.50, 0.40, Verdict.INCONCLUSIVE),   # large, not significant
    (math.log(1.30), 0.05, 0.06, Verdict.INCONCLUSIVE),   # significant raw, not after BH
    (math.log(1.04), 0.05, 0.001, Verdict.INCONCLUSIVE),  # significant, within δ, wide interval
    (0.0, 0.20, 1.0, Verdict.INCONCLUSIVE),               # no change seen, interval too wide
])
def test_verdict(log_ratio, spread, p_adjusted, expected):
    s = make_shift(log_ratio, spread)
    assert stats.verdict(s, p_adjusted, alpha=ALPHA, delta=0.05) == expected


def test_verdict_boundary_is_delta():
    just_over = make_shift(math.log1p(0.05) + 1e-9, 0.001)
    just_under = make_shift(math.log1p(0.05) - 1e-9, 0.001)
    assert stats.verdict(just_over, 1e-9, alpha=ALPHA, delta=0.05) == Verdict.REGRESSED
    assert stats.verdict(just_under, 1e-9, alpha=ALPHA, delta=0.05) != Verdict.REGRESSED


# ---- minimum detectable effect ---------------------------------------------------------------

@pytest.mark.parametrize("spread", [0.0005, 0.01, 0.05, 0.3])
def test_mde_is_at_least_delta_and_shrinks_with_processes(spread):
    mdes = [stats.minimum_detectable_effect(make_shift(0.0, spread, n, n), alpha=ALPHA,
                                            power=POWER, delta=0.05, tests=60)
            for n in (3, 5, 10, 20, 80)]
    assert all(m >= 0.05 for m in mdes)
    assert all(a > b for a, b in zip(mdes, mdes[1:]))


def test_mde_grows_with_tests_and_spread():
    def mde(spread, tests):
        return stats.minimum_detectable_effect(make_shift(0.0, spread), alpha=ALPHA,
                                               power=POWER, delta=0.05, tests=tests)
    assert mde(0.1, 1) < mde(0.1, 10) < mde(0.1, 100)
    assert mde(0.05, 60) < mde(0.1, 60) < mde(0.2, 60)


def _welch_regressed(rng, n1, n2, sigma, ratio, level, delta, trials=20000):
    """Fraction of simulated runs in which Welch's test calls a true `ratio` REGRESSED."""
    x = np.log(lognormal(rng, n1, 1.0, sigma, trials))
    y = np.log(lognormal(rng, n2, ratio, sigma, trials))
    test = sps.ttest_ind(y, x, equal_var=False, axis=1)
    d = y.mean(axis=1) - x.mean(axis=1)
    return np.mean((test.pvalue <= level) & (d > math.log1p(delta)))


@pytest.mark.parametrize("n1,n2,tests,sigma", [
    (5, 5, 60, 0.10),       # significance decides
    (5, 5, 60, 0.012),      # both significance and δ bind
    (5, 5, 1, 0.002),       # δ decides
    (3, 8, 30, 0.05),
    (12, 12, 200, 0.05),
])
def test_mde_has_the_claimed_power(n1, n2, tests, sigma):
    """A true slowdown of the MDE reported at the typical (median) spread is REGRESSED by the
    Welch test, at the BH level of a lone effect, in 80 % of runs."""
    s = make_shift(0.0, median_spread(sigma, n1, n2), n1, n2)
    mde = stats.minimum_detectable_effect(s, alpha=ALPHA, power=POWER, delta=0.05, tests=tests)
    rng = np.random.default_rng(n1 * 1000 + tests)
    power = _welch_regressed(rng, n1, n2, sigma, 1 + mde, ALPHA / tests, 0.05)
    assert power == pytest.approx(POWER, abs=0.015)


# ---- processes needed ------------------------------------------------------------------------

def _decided(rng, n, truth, sigma, tests, delta=0.05, trials=400):
    """Fraction of runs with n processes a side, truth and spread known, that are decided."""
    verdicts = []
    for base, now in zip(lognormal(rng, n, 1.0, sigma, trials),
                         lognormal(rng, n, truth, sigma, trials)):
        s = stats.shift(base.tolist(), now.tolist())
        verdicts.append(stats.verdict(s, min(1.0, s.p_value * tests), alpha=ALPHA,
                                      delta=delta))
    return {v: verdicts.count(v) / trials for v in set(verdicts)}


@pytest.mark.parametrize("ratio,spread,decision", [
    (1.00, 0.06, Verdict.EQUIVALENT),
    (1.02, 0.04, Verdict.EQUIVALENT),
    (1.30, 0.30, Verdict.REGRESSED),
    (1 / 1.2, 0.20, Verdict.IMPROVED),
])
def test_processes_needed_decides(ratio, spread, decision):
    """Taking an INCONCLUSIVE run's estimate and spread as the truth, the suggested number of
    processes a side reaches the decision in most runs (planned for POWER)."""
    tests = 60
    s = make_shift(math.log(ratio), spread)
    assert stats.verdict(s, min(1.0, s.p_value * tests), alpha=ALPHA,
                         delta=0.05) == Verdict.INCONCLUSIVE
    n = stats.processes_needed(s, alpha=ALPHA, power=POWER, delta=0.05, tests=tests)
    assert n is not None and n > 5
    rates = _decided(np.random.default_rng(n), n, ratio, spread, tests)
    assert rates.get(decision, 0) >= 0.7, (n, rates)
    half = _decided(np.random.default_rng(n), n // 2, ratio, spread, tests)
    assert half.get(decision, 0) < POWER, "the suggestion is not needlessly large"


def test_processes_needed_edges():
    kwargs = dict(alpha=ALPHA, power=POWER, delta=0.05, tests=10)
    on_edge = make_shift(math.log1p(0.05), 0.1)
    assert stats.processes_needed(on_edge, **kwargs) is None
    tiny_gap = make_shift(math.log1p(0.05) - 1e-7, 0.1)
    assert stats.processes_needed(tiny_gap, **kwargs) is None      # beyond `most`
    clear = make_shift(math.log(1.5), 0.01, 7, 9)
    assert stats.processes_needed(clear, **kwargs) == 9            # never fewer than now
    n = stats.processes_needed(make_shift(0.0, 0.08), **kwargs)
    assert n in stats._LADDER


def test_median_is_the_middle():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert median([]) is None


# ---- paired (interleaved A/B) ----------------------------------------------------------------

def test_paired_shift_is_a_paired_t_test_on_logs():
    rng = np.random.default_rng(7)
    machine = np.exp(0.3 * rng.standard_normal(6))        # each pair's shared machine speed
    base = machine * lognormal(rng, 6, 1.0, 0.01)
    now = machine * lognormal(rng, 6, 1.03, 0.01)
    s = stats.paired_shift(base.tolist(), now.tolist())
    ref = sps.ttest_rel(np.log(now), np.log(base))
    assert s.paired and (s.n_base, s.n_now, s.df) == (6, 6, 5)
    assert s.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert s.log_ratio == pytest.approx(np.mean(np.log(now / base)))
    low, high = ref.confidence_interval(0.95)
    assert s.interval(0.05) == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)
    # The machine's 30 % swings cancel in the pairs: Welch on the same data sees only noise.
    assert s.p_value < 0.01 < stats.shift(base.tolist(), now.tolist()).p_value


@pytest.mark.parametrize("base,now", [([1.0], [1.0]), ([1.0, 2.0], [1.0]),
                                      ([1.0, 0.0], [1.0, 1.0]), ([1.0, math.inf], [1.0, 1.0])])
def test_paired_shift_needs_two_complete_positive_pairs(base, now):
    assert stats.paired_shift(base, now) is None


def _paired_regressed(rng, n, sigma_pair, ratio, level, delta, trials=20000):
    """Fraction of runs in which the paired test calls a true `ratio` REGRESSED."""
    d = math.log(ratio) + sigma_pair * rng.standard_normal((trials, n))
    test = sps.ttest_1samp(d, 0.0, axis=1)
    return np.mean((test.pvalue <= level) & (d.mean(axis=1) > math.log1p(delta)))


@pytest.mark.parametrize("n,tests,sigma_pair", [(4, 10, 0.01), (7, 60, 0.03), (5, 1, 0.002)])
def test_paired_mde_has_the_claimed_power(n, tests, sigma_pair):
    """The MDE of a paired shift at the typical spread has the claimed power for the paired
    test as run, with its n - 1 degrees of freedom (below 8 pairs: untrimmed; the trimmed
    test's in tests/test_stats_trimmed.py)."""
    typical = sigma_pair * math.sqrt(sps.chi2.median(n - 1) / (n - 1))
    d = typical * np.linspace(-1, 1, n) / np.std(np.linspace(-1, 1, n), ddof=1)
    s = stats.paired_shift([1.0] * n, np.exp(d).tolist())
    assert s.spread * math.sqrt(2) == pytest.approx(typical)
    mde = stats.minimum_detectable_effect(s, alpha=ALPHA, power=POWER, delta=0.05, tests=tests)
    power = _paired_regressed(np.random.default_rng(n), n, sigma_pair, 1 + mde,
                              ALPHA / tests, 0.05)
    assert power == pytest.approx(POWER, abs=0.015)


# ---- what δ means ----------------------------------------------------------------------------

def _regressed_share(truth, k, spread, tests, trials=2000, delta=0.05):
    rng = np.random.default_rng(int(truth * 1e4) + k)
    x, y = lognormal(rng, k, 1.0, spread, trials), lognormal(rng, k, truth, spread, trials)
    hits = 0
    for a, b in zip(x, y):
        s = stats.shift(a.tolist(), b.tolist())
        hits += stats.verdict(s, min(1.0, s.p_value * tests), alpha=ALPHA,
                              delta=delta) == Verdict.REGRESSED
    return hits / trials


def test_delta_bounds_the_estimate_not_the_truth():
    """REGRESSED needs the estimate beyond δ, not the interval: a true change of 0.9·δ is
    flagged in up to ~30 % of runs where the spread is ~0.4·δ (2 % at δ = 5 %) and many
    processes make it significant, and almost never on a quiet unit; 1.1·δ is caught in most.
    stages/judge/__init__.py quotes these figures."""
    worst = _regressed_share(1.045, 8, 0.02, tests=60)
    quiet = _regressed_share(1.045, 15, 0.002, tests=60)
    caught = _regressed_share(1.055, 15, 0.005, tests=60)
    print(f"\n0.9·δ REGRESSED: {worst:.2f} (K=8, 2 %), {quiet:.3f} (K=15, 0.2 %); "
          f"1.1·δ: {caught:.2f} (K=15, 0.5 %)")
    assert 0.15 <= worst <= 0.35
    assert quiet <= 0.01
    assert caught >= 0.95
