"""The measurement phases, driven by a simulated clock: exact and fast."""
from stages.timing import measure


class FakeClock:
    """Each call of the step advances simulated time by the next duration."""

    def __init__(self):
        self.now = 0.0
        self.t0 = 0.0

    def start(self):
        self.t0 = self.now

    def stop(self):
        return self.now - self.t0


def test_first_call_warmup_and_batched_steady_state_are_separate():
    clock = FakeClock()
    durations = iter([5.0] + [0.004] * 2 + [0.001] * 10_000)  # compile, settling, steady

    def step():
        clock.now += next(durations)
        return "out"

    seen = []
    phases = measure(step, clock, samples=4, sample_target_s=0.02, warmup_s=0.0095,
                     min_warmup_calls=3, after_first=lambda: seen.append(clock.now))
    assert phases.first_call_s == 5.0
    assert seen == [5.0]
    assert phases.warmup_calls == 4 and abs(phases.warmup_s - 0.010) < 1e-12
    assert phases.calls_per_sample == 20          # calibrated on the later warm-up calls
    assert len(phases.steady_s) == 4
    assert all(abs(s - 0.001) < 1e-12 for s in phases.steady_s)
    assert phases.first_output == "out"


def test_a_slow_step_gets_one_call_per_sample():
    clock = FakeClock()

    def step():
        clock.now += 0.5

    phases = measure(step, clock, samples=2, sample_target_s=0.02, warmup_s=0.0,
                     min_warmup_calls=1)
    assert phases.calls_per_sample == 1
    assert phases.steady_s == [0.5, 0.5]
