"""Environments compared: which fields changed, and whether the hardware under the timings did,
environment by environment and unit by unit (from the processes' own hardware keys)."""
from __future__ import annotations

from typing import Any

from torchgate.core.records.dotted import changed, get
from torchgate.core.records.packages import comparable
from torchgate.core.records.schema import BenchRecord, Hardware
from torchgate.core.vocabulary import Status

# The fields whose change makes timings incomparable, as (dotted field, hardware_key name).
HARDWARE_FIELDS = (
    ("hardware.cpu_model", "cpu_model"),
    ("hardware.gpu_names", "gpu_names"),
    ("torch.num_threads", "torch_threads"),
)
Change = tuple[str, object, object]      # (dotted field, baseline's value, this run's)


def hardware_key(env: dict) -> dict:
    """What must match for two timings to be comparable: CPU, GPUs, torch threads."""
    return {name: get(env, dotted) for dotted, name in HARDWARE_FIELDS}


def diff(base: dict | None, now: dict) -> list[Change]:
    """Changed, added and removed dotted fields, sorted; an absent side is MISSING. Packages
    are compared on those that matter (core.records.packages.comparable): an older baseline
    that lists every installed distribution, on the names that matter now."""
    return changed(*comparable(base, now))


def hardware_first(changes: list[Change]) -> list[Change]:
    """A diff with the hardware fields (what makes timings incomparable) first."""
    first = {dotted for dotted, _ in HARDWARE_FIELDS}
    return sorted(changes, key=lambda c: (c[0] not in first, c[0]))


def hardware_changes(base: dict, now: dict) -> list[tuple[str, Any, Any]]:
    """(name, baseline's, now) for every hardware field that differs."""
    old, new = hardware_key(base), hardware_key(now)
    return [(name, old[name], new[name]) for name in old if old[name] != new[name]]


def python_change(base: dict | None, now: dict | None) -> str | None:
    """"CPython 3.11.7 -> 3.12.1" when the interpreter differs between two environments; None
    when it does not, or when either side does not say."""
    versions = [(get(env, "python.implementation"), get(env, "python.version"))
                for env in (base, now)]
    if any(v is None for _, v in versions) or versions[0] == versions[1]:
        return None
    (old_impl, old), (new_impl, new) = versions
    return (f"{old_impl or 'Python'} {old} -> {new}" if old_impl == new_impl else
            f"{old_impl} {old} -> {new_impl} {new}")


# ---- placement ------------------------------------------------------------
# Whether a unit's timings ran on one hardware. Each worker process records the hardware key
# it ran on (`host.hardware`: CPU model, the accelerator it used, torch's threads). A side whose
# processes ran on different hardware has no single timing to test; two sides on different
# hardware are not compared (unless `compare.allow_hardware_change`). Records without the key
# (written by an older torchgate) leave the decision to the environments. Pure.

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
