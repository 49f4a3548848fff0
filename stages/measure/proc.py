"""What Linux says about this process and the machine under it: busy and steal time per CPU,
the CPUs and the CPU quota this process may use, its threads' run-queue delay, and the CPU time
of its descendants, and the processes a worker left behind.

Every reader takes the root of /proc (and of the cgroup tree), so that tests can hand it a
fake one, and returns None where a file is missing or unreadable (macOS, a locked-down
container): a reading the machine cannot give is absent, never a crash. Standard library only.
"""
from __future__ import annotations

import os
from pathlib import Path

from torchgate.core.names import NAME, OLD

PROC = "/proc"
CGROUP = "/sys/fs/cgroup"


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except (OSError, ValueError):
        return None


def hz() -> int:
    """Clock ticks per second: the unit of /proc's CPU times."""
    try:
        return os.sysconf("SC_CLK_TCK")
    except (AttributeError, OSError, ValueError):
        return 100


def cpu_times(cpus: set[int] | None = None, proc: str = PROC) -> tuple[float, float] | None:
    """(busy, steal) seconds since boot, summed over `cpus` (every CPU when None, or when the
    kernel lists no CPU of its own). Busy is user + nice + system + irq + softirq."""
    text = _text(Path(proc) / "stat")
    if text is None:
        return None
    total, per_cpu = None, {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu"):
            continue
        try:
            ticks = ([int(x) for x in rest.split()[:8]] + [0] * 8)[:8]
        except ValueError:
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
        busy_steal = (user + nice + system + irq + softirq, steal)
        if name == "cpu":
            total = busy_steal
        elif name[3:].isdigit():
            per_cpu[int(name[3:])] = busy_steal
    chosen = [v for c, v in per_cpu.items() if cpus is None or c in cpus]
    if cpus is not None and chosen:
        busy, steal = map(sum, zip(*chosen))
    elif total is not None:
        busy, steal = total
    else:
        return None
    return busy / hz(), steal / hz()


def _cpu_list(text: str) -> set[int]:
    """"0-3,6" -> {0, 1, 2, 3, 6}."""
    found: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


def allowed_cpus(proc: str = PROC) -> set[int] | None:
    """The CPUs this process may run on: the mask sched_getaffinity(2) returns (a cpuset or
    taskset), read from status so that a fake /proc can stand in for it."""
    text = _text(Path(proc) / "self" / "status")
    for line in (text or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            try:
                return _cpu_list(line.split(":", 1)[1]) or None
            except ValueError:
                return None
    return None


def _quota(directory: Path, v2: bool) -> float | None:
    """One cgroup's CPU limit in CPUs (quota / period); None when unlimited or unreadable."""
    try:
        if v2:
            text = _text(directory / "cpu.max")        # "max 100000" or "150000 100000"
            if not text:
                return None
            quota, period = (text.split() + ["100000"])[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota = int(_text(directory / "cpu.cfs_quota_us") or -1)
        period = int(_text(directory / "cpu.cfs_period_us") or 0)
        return quota / period if quota > 0 and period > 0 else None
    except ValueError:
        return None


def cpu_quota(proc: str = PROC, cgroup: str = CGROUP) -> float | None:
    """The CPUs' worth of time this process's cgroup may use (docker --cpus, a Kubernetes
    limit): the tightest quota along its cgroup path, v2 (cpu.max) or v1 (cfs_quota_us); None
    when unlimited or unknown."""
    text = _text(Path(proc) / "self" / "cgroup")
    limits = []
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        v2 = controllers == ""
        if not v2 and "cpu" not in controllers.split(","):
            continue
        mounts = ([Path(cgroup), Path(cgroup) / "unified"] if v2 else
                  [Path(cgroup) / controllers, Path(cgroup) / "cpu"])
        for mount in mounts:
            # In a container the cgroup path is often not under the mount (the mount is the
            # container's own cgroup): the folders that exist, deepest first, then the mount.
            rel = Path(path.strip().lstrip("/"))
            for directory in [mount / rel, *[mount / p for p in rel.parents]]:
                if directory.is_dir():
                    limits.append(_quota(directory, v2))
    limits = [x for x in limits if x is not None]
    return min(limits) if limits else None


def run_queue_ns(proc: str = PROC) -> dict[str, int] | None:
    """Per thread of this process, nanoseconds spent runnable but waiting for a CPU (the
    second field of schedstat); None without schedstat."""
    tasks = Path(proc) / "self" / "task"
    try:
        tids = os.listdir(tasks)
    except OSError:
        return None
    found = {}
    for tid in tids:
        try:
            found[tid] = int((_text(tasks / tid / "schedstat") or "").split()[1])
        except (IndexError, ValueError):
            continue                                  # a thread that just exited
    return found or None


def _fields(path: Path) -> list[str]:
    """A /proc/<pid>/stat's fields after the name, the state first; [] where unreadable."""
    text = _text(path)          # the name in parentheses may hold anything
    return text.rsplit(")", 1)[1].split() if text and ")" in text else []


def _stat(path: Path) -> tuple[int, float] | None:
    """(ppid, utime + stime + cutime + cstime in seconds) from a /proc/<pid>/stat."""
    fields = _fields(path)
    try:
        return int(fields[1]), sum(int(x) for x in fields[11:15]) / hz()
    except (IndexError, ValueError):
        return None


def started_at(pid: int, proc: str = PROC) -> int | None:
    """When a process started, in clock ticks since boot; None where unreadable."""
    fields = _fields(Path(proc) / str(pid) / "stat")
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def process_cpu_s(pid: int, proc: str = PROC) -> float | None:
    """CPU seconds of one process, all its threads (and the children it has waited for):
    one small read, cheap enough between two timed samples."""
    read = _stat(Path(proc) / str(pid) / "stat")
    return None if read is None else read[1]


def tree_cpu_s(proc: str = PROC, pid: int | None = None) -> dict[int, float] | None:
    """CPU seconds of this process and of every live descendant (torch.compile's compile
    workers, say), per pid, each with the time of the children it has waited for.

    cutime/cstime alone would miss descendants that are still running (a compile worker
    pool lives as long as the worker), so the tree is walked by parent pids. The difference
    of two totals then counts a descendant that exited in between too: its time moved into
    its parent's cutime."""
    pid = os.getpid() if pid is None else pid
    stats = _processes(proc)
    if stats is None or pid not in stats:
        return None
    return {p: stats[p][1] for p in _tree({p: s[0] for p, s in stats.items()}, pid)}


def _processes(proc: str) -> dict[int, tuple[int, float]] | None:
    """Every live process's (ppid, CPU seconds), by pid; None where /proc cannot be read."""
    try:
        names = [n for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return None
    return {int(n): read for n in names if (read := _stat(Path(proc) / n / "stat"))}


def _tree(parents: dict[int, int], pid: int) -> set[int]:
    """`pid` and its descendants, walked by parent pids."""
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    tree, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in tree:
            tree.add(p)
            todo.extend(children.get(p, ()))
    return tree


def orphans(own: set[int], since: int, proc: str = PROC, pid: int | None = None) -> list[int]:
    """This process's children in a session other than its own, started at or after `since`
    (started_at of a worker), less `own` (the workers it started in sessions of their own):
    what that worker started with `setsid` and left behind, reparented here (core.lifetime.
    launched makes this process their subreaper). A child in this process's own session (a
    `git` it runs) or older than the worker (a Ray cluster it started) is never one."""
    pid = os.getpid() if pid is None else pid
    try:
        session, names = os.getsid(0), [n for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return []
    found = []
    for n in names:
        fields = _fields(Path(proc) / n / "stat")
        try:
            ppid, sid, born = int(fields[1]), int(fields[3]), int(fields[19])
        except (IndexError, ValueError):
            continue
        if ppid == pid and sid != session and born >= since and int(n) not in own:
            found.append(int(n))
    return found


def carrying(name: str, value: str, proc: str = PROC) -> list[int]:
    """The processes whose environment holds `name=value`: what a worker started, also in a
    session of its own or reparented once the worker ended, since children inherit the
    environment (one that clears it is not found). Only this user's processes can be read."""
    entry = f"{name}={value}".encode()
    try:
        names = [n for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return []
    found = []
    for n in names:
        try:
            environ = (Path(proc) / n / "environ").read_bytes()
        except OSError:           # another user's, or one that just exited
            continue
        if entry in environ.split(b"\0"):
            found.append(int(n))
    return found


# The modules a torchgate measurement runs as, matched in other processes' command lines:
# `python -m torchgate.<name>`, and `stages.<name>` of an older torchgate running beside
# (never imported: spelled apart from the package, which tests/test_layout.py reads as one).
MEASURING = tuple(f"{package}.{name}" for package in (NAME, OLD)
                  for name in ("bench", "numerics", "measure.worker", "measure.rank"))


def sibling_runs(proc: str = PROC, pid: int | None = None) -> list[tuple[int, str]]:
    """Other torchgate measurements on this machine, (pid, command): a stage or worker that is
    neither this process nor one of its ancestors or descendants: a second `dvc repro`, or
    experiments started together (`dvc queue start -j 2`), whose load moves this run's
    timings."""
    pid = os.getpid() if pid is None else pid
    parents = {p: s[0] for p, s in (_processes(proc) or {}).items()}
    ours, at = _tree(parents, pid), pid                    # this process, its descendants
    while at in parents and parents[at] not in ours:      # and its ancestors
        at = parents[at]
        ours.add(at)
    found = []
    for n in sorted(set(parents) - ours):
        try:
            args = (Path(proc) / str(n) / "cmdline").read_bytes().decode(
                errors="replace").split("\0")
        except OSError:
            continue
        if "-m" in args[:-1] and args[args.index("-m") + 1] in MEASURING:
            found.append((n, " ".join(a for a in args if a)[:200]))
    return found
