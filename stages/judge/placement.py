"""Whether a unit's timings ran on one hardware. Each worker process records the hardware key
it ran on (`host.hardware`: CPU model, the accelerator it used, torch's threads). A side whose
processes ran on different hardware has no single timing to test; two sides on different
hardware are not compared (unless `compare.allow_hardware_change`). Records without the key
(written by an older torchgate) leave the decision to the environments. Pure."""
from __future__ import annotations

from stages.core.records.host import Hardware
from stages.core.records.schema import BenchRecord
from stages.core.vocabulary import Status

FIELDS = ("cpu_model", "gpu_names", "torch_threads")


def hardware_of(record: BenchRecord | None, workload: str) -> dict[Hardware, list[str]]:
    """The hardware keys the unit's successful processes ran on, each with its hosts."""
    run = record.workloads.get(workload) if record is not None else None
    found: dict[Hardware, list[str]] = {}
    for proc in run.processes if run else ():
        if proc.status == Status.OK and proc.host is not None and proc.host.hardware is not None:
            hosts = found.setdefault(proc.host.hardware, [])
            name = proc.host.name or "?"
            if name not in hosts:
                hosts.append(name)
    return found


def _show(value) -> str:
    if isinstance(value, tuple):
        return ", ".join(value) if value else "none"
    return "unknown" if value is None else str(value)


def _changed(keys: list[Hardware]) -> list[str]:
    return [f for f in FIELDS if len({getattr(k, f) for k in keys}) > 1]


def mixed(label: str, found: dict[Hardware, list[str]]) -> str | None:
    """Why a side cannot be tested: its processes ran on more than one hardware."""
    if len(found) <= 1:
        return None
    parts = [f"{f}: " + ", ".join(f"{_show(getattr(k, f))} on {'/'.join(hosts)}"
                                  for k, hosts in found.items())
             for f in _changed(list(found))]
    return (f"{label}'s processes ran on different hardware ({'; '.join(parts)}); give "
            "each hardware a device of its own (device.<name>.resources or accelerator_type)")


def unit_reason(now: BenchRecord | None, base: BenchRecord | None, workload: str, *,
                env_reason: str | None, allow_change: bool, same_run: bool) -> str | None:
    """Why this unit's timings are NOT COMPARABLE as far as hardware goes, or None. A side
    on mixed hardware always is; between the sides, the processes' keys decide when both
    carry them, else the environments' (`env_reason`)."""
    ours, theirs = hardware_of(now, workload), hardware_of(base, workload)
    for label, found in (("this run", ours), ("the baseline", theirs)):
        why = mixed(label, found)
        if why:
            return why
    if same_run:
        return None
    if not (ours and theirs):
        return env_reason
    if allow_change:
        return None
    (before,), (after,) = theirs, ours
    changed = _changed([before, after])
    if not changed:
        return None
    return "hardware changed (" + "; ".join(
        f"{f}: {_show(getattr(before, f))} -> {_show(getattr(after, f))}" for f in changed) + ")"
