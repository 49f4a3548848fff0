"""Starts worker processes: the one seam between measurement and where it runs.

Local subprocesses today; a cluster engine (Ray, SLURM via submitit) can replace `run_worker`
without touching measurement or statistics. Every failure mode of a worker (exception,
crash, hard abort, timeout, missing result) comes back as a status with a message.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_INDUCTOR_CACHE = Path(tempfile.gettempdir()) / "torchgate-inductor-cache"


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code} before writing its result"


def run_worker(job: dict, *, timeout_s: float, python: str | None = None,
               fresh_compile_cache: bool = True) -> dict:
    """Run one job in a fresh process; always returns a dict with `status`.

    A fresh inductor cache per process makes the first compiled call a real cold compile.
    """
    with tempfile.TemporaryDirectory(prefix="torchgate-") as tmp:
        tmp_path = Path(tmp)
        job_path, result_path = tmp_path / "job.json", tmp_path / "result.json"
        stderr_path = tmp_path / "stderr.txt"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        env = dict(os.environ)
        # The stage's folder first, so a workload in the user's own module imports by name.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), str(ROOT),
                                                          env.get("PYTHONPATH")]))
        env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor" if fresh_compile_cache
                                             else SHARED_INDUCTOR_CACHE)
        started = time.perf_counter()
        with open(stderr_path, "wb") as err, open(os.devnull, "wb") as out:
            proc = subprocess.Popen(
                [python or sys.executable, "-m", "stages.worker", str(job_path), str(result_path)],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True)  # its own process group: a timeout kills compilers too
            try:
                code = proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                if proc.poll() is None:  # timeout, or this stage was interrupted
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        wall_s = time.perf_counter() - started
        if timed_out:
            return {"status": "TIMEOUT", "wall_s": wall_s,
                    "error": f"no result within the {timeout_s:g} s time limit "
                             "(raise bench.timeout_s or the workload's _timeout_s_)",
                    "stderr_tail": _tail(stderr_path)}
        if result_path.exists():
            return json.loads(result_path.read_text(encoding="utf-8"))
        tail = _tail(stderr_path)
        status = "OOM" if code == -signal.SIGKILL else "CRASHED"
        reason = _describe_exit(code) + (" (likely the out-of-memory killer)"
                                         if status == "OOM" else "")
        last = tail.splitlines()[-1] if tail else "no output on stderr"
        return {"status": status, "wall_s": wall_s, "error": f"worker {reason}: {last}"[:500],
                "stderr_tail": tail}
