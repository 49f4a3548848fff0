"""How long torchgate's processes live: a worker ends with the process that launched it, and
a stage run by DVC ends with DVC, whatever ends them (SIGKILL, the OOM killer, an ssh drop).

A worker runs in a process group of its own (its compiler subprocesses and a workload's own
processes join it), so the launcher kills the whole group, also once the worker itself has
exited. For a launcher that is killed outright (nothing of it runs), each worker holds the
read end of a pipe whose write end only the launcher holds (a "lifeline"): the kernel closes it
when the launcher ends, however it ends. A small watcher process, forked by the worker first
thing (one thread, before torch is imported), blocks reading it and then kills the worker's
group. A process of its own, it needs neither the worker's GIL nor a signal handler that a hung
C call would never run, and it costs no wake-ups while samples are timed (a watchdog thread
polling the parent would). The worker also asks Linux for SIGKILL when its parent dies
(PR_SET_PDEATHSIG), in case the watcher itself was killed. Other commands that must not
outlive a stage (a venv's installer, arms.venv) run through `run_bound`, which does the same
for them before it execs them.

Standard library only: a worker imports this before torch.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import signal
import subprocess
import sys
import threading
from typing import Callable

# How long another interpreter may take to start and answer (a venv's check, an environment
# captured there): an import of torch, with room for a cold disk.
INTERPRETER_TIMEOUT_S = 120
LIFELINE = "TORCHGATE_LIFELINE"   # "<read fd>:<launcher pid>", for the worker it starts
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_launched: set[int] = set()           # processes `launched` started, not yet waited for
_launching = threading.Lock()
_pipe: tuple[int, int, int] | None = None    # (read fd, write fd, the pid that made it)


def killed_by(code: int) -> str | None:
    """"killed by signal SIGKILL" for a negative return code (a process ended by a signal);
    None for a process that exited by itself."""
    if code >= 0:
        return None
    try:
        return f"killed by signal {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:        # find_library runs a program: once a process
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def _prctl(option: int, value: int) -> bool:
    """prctl(2); False where there is none (macOS)."""
    if not sys.platform.startswith("linux") or _libc() is None:
        return False
    try:
        return _libc().prctl(option, value, 0, 0, 0) == 0
    except AttributeError:
        return False


def parent_death_signal(signum: int) -> bool:
    """Ask Linux to send `signum` to this process when its parent ends (strictly: when the
    parent's thread that started it ends; launchers wait for their workers in that thread).
    False where there is no prctl (macOS: the lifeline alone then)."""
    return _prctl(PR_SET_PDEATHSIG, signum)


def launched(start: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """Start a process in a session of its own (`start`) that this one waits for and kills:
    it is known as this process's own, never taken for an orphan (`orphans_left`). This
    process becomes its descendants' subreaper first: one that leaves its process group and
    its environment behind (`setsid`, `env -i`) and outlives its parent is then reparented
    here, not to init, where the launcher finds it; for as long as such a process runs (a
    program's own daemons, before and after, are none of torchgate's)."""
    with _launching:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        try:
            proc = start()
        except BaseException:
            if not _launched:
                _prctl(PR_SET_CHILD_SUBREAPER, 0)
            raise
        _launched.add(proc.pid)
        return proc


def ended(pid: int | None) -> None:
    """A process `launched` started has been waited for, and what it left killed."""
    with _launching:
        _launched.discard(pid)
        if not _launched:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)


def orphans_left(find: Callable[[set[int]], list[int]]) -> list[int]:
    """Kill and reap what the processes `launched` started and left behind in a session of
    their own, reparented here (`find`: this process's children in another session than its
    own, less the pids given; measure.proc.orphans). Their own orphans follow them here, so it
    looks again until none is left. Returns the pids killed."""
    killed: list[int] = []
    with _launching:                 # no worker is starting: none is taken for an orphan
        for _ in range(100):
            found = [pid for pid in find(set(_launched)) if pid not in killed]
            if not found:
                break
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, PermissionError, ChildProcessError):
                    pass
                killed.append(pid)
    return killed


def lifeline() -> tuple[int, dict[str, str]]:
    """Launcher side: the read end to pass to a worker (pass_fds) and its environment entry.
    One pipe per launching process, its write end kept open, never inherited, until it ends."""
    global _pipe
    if _pipe is None or _pipe[2] != os.getpid():    # made anew in a forked child
        _pipe = (*os.pipe(), os.getpid())
    return _pipe[0], {LIFELINE: f"{_pipe[0]}:{os.getpid()}"}


def hold_launcher() -> None:
    """Worker side, first thing: end with the launcher. A no-op for a process not started by
    launch.local (no lifeline in its environment) or not leading its own process group."""
    value = os.environ.pop(LIFELINE, None)
    if not value or os.getpgrp() != os.getpid():
        return
    fd, launcher = (int(part) for part in value.split(":"))
    parent_death_signal(signal.SIGKILL)
    if os.getppid() != launcher:      # it ended before the line above took effect
        os._exit(70)
    group = os.getpid()
    if os.fork() == 0:
        _watch(fd, group)
    os.close(fd)


def _watch(fd: int, group: int) -> None:
    """The watcher: holds nothing of the worker's (an interleaved worker's turn pipes must
    close when it exits), waits for the end of file, then kills the group, itself included."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):       # a caller reading the command's output must see its end
            os.dup2(null, std)
        os.closerange(3, fd)
        os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
        while os.read(fd, 1):       # nothing is ever written: only the end of file returns
            pass
    finally:
        try:
            os.killpg(group, signal.SIGKILL)
        finally:
            os._exit(0)


# Holds the lifeline, then becomes the command (the parent-death signal survives exec). It
# runs this file (argv[1]) by its path: the standard library is all it needs, in any venv.
BOUND = ("import os, runpy, sys; runpy.run_path(sys.argv[1])['hold_launcher'](); "
         "os.execvp(sys.argv[2], sys.argv[2:])")


def run_bound(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run for a command that must not outlive this process (an installer: a
    killed stage would leave it loading the machine and writing into a venv the next run
    builds again): in a process group of its own, ending with this process, and killed with
    whatever it started once it has exited."""
    line, entry = lifeline()
    env = {**kwargs.pop("env", os.environ), **entry}
    with launched(lambda: subprocess.Popen([sys.executable, "-c", BOUND, __file__, *args],
                                           pass_fds=(line,), env=env, start_new_session=True,
                                           **kwargs)) as proc:
        try:
            out, err = proc.communicate()
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            ended(proc.pid)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def die_with_dvc() -> None:
    """A stage run by DVC (which sets DVC_STAGE) gets SIGTERM when DVC ends: DVC forwards no
    signal to it, and a stage left running loads the machine for nothing (its outputs are
    never recorded in dvc.lock)."""
    if os.environ.get("DVC_STAGE"):
        parent_death_signal(signal.SIGTERM)
