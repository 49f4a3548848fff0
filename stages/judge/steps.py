"""Where the step goes, and what it used: a unit's input-pipeline breakdown with its diagnosis,
and its utilization and energy, as medians over processes. Pure.

The diagnosis names what bounds the step, from the shares of the step that the input wait
and the copy take (each process's part over its wait + copy + compute, the median over
processes). The device idles during both: when the larger of the two takes at least
`BOUND_SHARE` of the step, the step is input-bound (the wait is larger) or transfer-bound
(the copy is); otherwise compute-bound. A quarter: hiding that part (more loader workers,
pinned memory, prefetching) would make the step at least a third faster. In `NEAR_BAND`
(20-30 %) the step is *near* input- or transfer-bound: one setting must not read both ways
between two modes or runs.

On a CPU the loader's workers and torch's threads share the cores: where they outnumber them,
the step is *oversubscribed* whatever its shares (measured: `loader_train` at 2 loader workers
and 2 threads on 2 cores, the wait 55 % → 20 % of the step while compute rose 10.7 → 24.3 ms
and the step stayed 24 ms: the workers took the threads' cores). The compute part then holds
waits for a core, and more workers only move time from one part to the other.

A part under the steady state's δ of the step on both sides cannot move the step by more
than δ whatever it does: its row is EQUIVALENT without a test (`negligible`), so that a few
microseconds of wait for a prefetched batch, doubling, is not a finding.
"""
from __future__ import annotations

from torchgate.core.numbers import median
from torchgate.core.records.schema import ModeTiming
from torchgate.judge.results import BOUND_SHARE, NEAR_BAND, Breakdown, Usage

INPUT, TRANSFER, COMPUTE = "input-bound", "transfer-bound", "compute-bound"
NEAR = "near "                      # its larger share in NEAR_BAND


def diagnose(wait_share: float, copy_share: float | None) -> str:
    """The rule of the module's docstring."""
    copy_share = copy_share or 0.0
    larger = max(wait_share, copy_share)
    bound = INPUT if wait_share >= copy_share else TRANSFER
    if NEAR_BAND[0] <= larger < NEAR_BAND[1]:
        return NEAR + bound
    return bound if larger >= BOUND_SHARE else COMPUTE


def oversubscribed(modes: list[ModeTiming]) -> tuple[int, int, int] | None:
    """(loader workers, torch threads, cores) where the first two outnumber the cores in the
    median process (the module's docstring); None where they do not or were not recorded."""
    counted = [m for m in modes if None not in (m.loader_workers, m.torch_threads, m.cores)]
    if not counted:
        return None
    found = tuple(int(median(getattr(m, f) for m in counted))
                  for f in ("loader_workers", "torch_threads", "cores"))
    return found if found[0] + found[1] > found[2] else None


def step_total(m: ModeTiming) -> float | None:
    """One step's wait + copy + compute (no copy on the CPU)."""
    if m.input_wait_s is None or m.compute_s is None:
        return None
    return m.input_wait_s + (m.copy_s or 0.0) + m.compute_s


def share(m: ModeTiming, metric: str) -> float | None:
    """A part's share of the step in one process."""
    total, part = step_total(m), getattr(m, metric)
    return part / total if total and part is not None else None


def negligible(base: list[ModeTiming], now: list[ModeTiming], metric: str,
               delta: float) -> bool:
    """The part's median share is under δ on both sides (the module's docstring)."""
    shares = [median(s for m in side if (s := share(m, metric)) is not None)
              for side in (base, now)]
    return all(s is not None and s < delta for s in shares)


def breakdown(modes: list[ModeTiming]) -> Breakdown | None:
    """From the processes that timed the breakdown (None: none did)."""
    timed = [m for m in modes if step_total(m)]
    if not timed:
        return None

    def middle(values) -> float | None:
        return median(v for v in values if v is not None)

    wait, copy = middle(share(m, "input_wait_s") for m in timed), \
        middle(share(m, "copy_s") for m in timed)
    return Breakdown(
        len(timed), middle(m.breakdown_calls for m in timed),
        middle(m.input_wait_s for m in timed), middle(m.copy_s for m in timed),
        middle(m.compute_s for m in timed), wait, copy,
        middle(share(m, "compute_s") for m in timed),
        middle(m.copy_bytes / m.copy_s / 1e9 for m in timed
               if m.copy_bytes is not None and m.copy_s),
        diagnose(wait, copy), oversubscribed(timed))


def usage(modes: list[ModeTiming], kept: list[ModeTiming]) -> Usage | None:
    """`kept`: the processes whose steady state ran on a quiet machine (energy per item is
    tested like a timing, and counts the host's other work on the CPU); None: nothing read."""
    found = Usage(median([m.cpu_busy for m in modes if m.cpu_busy is not None]),
                  median([m.sm_util for m in modes if m.sm_util is not None]),
                  median([m.mem_util for m in modes if m.mem_util is not None]),
                  median([m.joules_per_item for m in kept if m.joules_per_item is not None]),
                  median([m.watts for m in kept if m.watts is not None]))
    return None if found == Usage(None, None, None, None, None) else found
