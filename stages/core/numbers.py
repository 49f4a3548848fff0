"""The one median every room uses: a worker's steady-state detection (measure), one number per
process and per run (judge), a progress line (render). Standard library only, so the other
interpreter of an A/B run, which has torch alone, imports it too."""
from __future__ import annotations

import math
import statistics
from typing import Iterable


def median(values: Iterable[float]) -> float | None:
    """The middle value (the mean of the two middle ones of an even count); None for none."""
    found = list(values)
    return statistics.median(found) if found else None


def geometric_mean(values: Iterable[float]) -> float | None:
    """exp of the mean log: the centre a test on log values estimates, so that two sides'
    geometric means are exactly the ratio the test reports. None for none, or for a value
    that is not positive."""
    found = list(values)
    if not found or min(found) <= 0:
        return None
    return math.exp(math.fsum(map(math.log, found)) / len(found))
