"""Shape changes: a workload that declares several input shapes runs each in turn, in
compiled modes, after its steady state (which stays the first shape's).

Dynamic shapes are what breaks first on a new backend or compiler version: a recompile on
every new shape (a recompile storm) or a guard that a new version adds. Per shape after the
first this records the first call there (the shape change, recompile included), one more
call at that shape (what a call costs once it is compiled), and the recompiles the change
caused, with their reasons from dynamo's log.
"""
from __future__ import annotations

from typing import Any, Callable

from stages.core.records.schema import ShapeRun
from stages.measure.clocks import Clock


def declared(shapes) -> list[tuple[str, Callable[[], Any]]]:
    """A workload's `shapes` (label -> step, in the order to run) as a checked list."""
    if not shapes:
        return []
    if not isinstance(shapes, dict) or not all(callable(s) for s in shapes.values()):
        raise TypeError("Workload.shapes must map a label to a step per input shape "
                        "(e.g. {'seq=16': step16, 'seq=32': step32}), first the step's own")
    return [(str(label), step) for label, step in shapes.items()]


def run_shapes(shapes, clock: Clock, recompiles: Callable[[], list[str]],
               turn: Callable[[], None] = lambda: None) -> tuple[ShapeRun, ...]:
    """Every shape after the first, in order. `recompiles()` gives the reasons dynamo has
    logged so far in this mode; a shape's are those its first call added."""
    found = []
    for label, step in declared(shapes)[1:]:
        turn()
        before = len(recompiles())
        try:
            clock.start()
            step()
            first = clock.stop()
            clock.start()
            step()
            again = clock.stop()
        except Exception as exc:   # the shape's failure is the mode's, named by its shape
            raise _at_shape(exc, label) from exc
        reasons = recompiles()[before:]
        found.append(ShapeRun(label, first, again, len(reasons),
                              tuple(dict.fromkeys(reasons))[:5]))
    return tuple(found)


def _at_shape(exc: Exception, label: str) -> Exception:
    try:
        return type(exc)(f"at shape {label}: {exc}")
    except Exception:             # an exception type that takes other arguments
        return RuntimeError(f"at shape {label}: {type(exc).__name__}: {exc}")
