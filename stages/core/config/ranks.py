"""Distributed units: `_ranks_: N` in a workload's YAML runs each of its units as N
data-parallel ranks (processes) inside the unit's one worker process, and `_slow_rank_` slows
one of them on purpose, a test knob for the straggler report (measure.ranks). Standard library
only: the worker reads these specs too.
"""
from __future__ import annotations

import math
from typing import Any

from stages.core.errors import UserError


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_ranks(body: dict, where: str) -> dict[str, Any]:
    """The WorkloadSpec fields of `_ranks_` and `_slow_rank_: {rank: R, factor: F}`."""
    ranks, slow = body.get("_ranks_"), body.get("_slow_rank_")
    if ranks is not None and (not _whole(ranks) or ranks < 1):
        raise UserError(f"{where}._ranks_ must be a whole number >= 1 (data-parallel ranks "
                        f"per unit), got {ranks!r}")
    if slow is None:
        return {"ranks": ranks}
    if ranks is None:
        raise UserError(f"{where}._slow_rank_ needs {where}._ranks_: it slows one of them")
    if not isinstance(slow, dict) or set(slow) != {"rank", "factor"}:
        raise UserError(f"{where}._slow_rank_ must be {{rank: R, factor: F}} (rank R's steps "
                        f"made F times as long), got {slow!r}")
    rank, factor = slow["rank"], slow["factor"]
    if not _whole(rank) or not 0 <= rank < ranks:
        raise UserError(f"{where}._slow_rank_.rank must be a rank from 0 to {ranks - 1}, "
                        f"got {rank!r}")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) \
            or not 1 <= factor < math.inf:
        raise UserError(f"{where}._slow_rank_.factor must be a number >= 1, got {factor!r}")
    return {"ranks": ranks, "slow_rank": rank, "slow_factor": float(factor)}


def rank_threads(threads: int, ranks: int) -> int:
    """Torch threads per rank: the unit's threads shared among its ranks, at least one each,
    so that N ranks fit the CPUs one process would have used."""
    return max(1, threads // max(ranks, 1))
