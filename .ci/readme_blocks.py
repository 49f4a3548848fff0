"""Every shell block of README.md and reports/README.md, run as written, in order, in a fresh
clone, as a new user pastes them (no TORCHGATE_MACHINE), with the README's Python and YAML
files written where its prose says and the command it gives for them.

    python3 .ci/readme_blocks.py

Run from the repository root, in a venv that holds the project's dependencies (.ci/run's,
built by the README's install block). Each line runs in bash in the clone and must exit 0; a
`dvc repro` may exit 255 only with the gate's own "failed:" line (the README says a regression
fails the run). After a line that commits, what it added must be committed, and no line may
leave records of a cell this machine cannot run to commit.

What a CI machine cannot be is replaced, and only that (SKIP, and the notes at `replace` and
`venv`; a SKIP line that no block holds fails the run, so it cannot outlive the docs):
- the quick start's venv sees this venv's packages (a .pth) rather than installing them again
  (torch alone is 5 GB); its `pip install` lines run as written, into it;
- the clone is a fork whose default matrix is `smoke`, measured small (2 processes, 5 samples,
  one cold compile, no adaptive rounds): the same commands measure one small workload instead
  of three for 4-9 minutes; the default matrix's cost is measured apart (the README's table);
- a Ray cluster on one machine: a free port for the head, its nodes' agents on ports of their
  own, stopped when the blocks end.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

DOCS = ("README.md", "reports/README.md")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SHELLS = ("bash", "sh", "shell", "console")

# Lines that cannot run on a CI machine, by their start, with why.
SKIP = {
    "pip install torch --index-url": "CI is the newcomer who skips the CPU wheel (.ci/run)",
    "pip install -e '.[test]' && python -m pytest -q":
        "the README's test command: .ci/run runs it in the checkout, beside these blocks",
    "python -m pytest -q -m \"not slow\"": "the fast lane: part of the suite .ci/run runs",
    "dvc metrics diff torchgate/ci-cpu":
        "names the hosted check's baseline branch, which only its repository holds",
}
VENV = "python3 -m venv .venv"     # the quick start's venv: see `venv`
RAY_PORT = "6379"                  # the README's head port: a free one here
LINE_TIMEOUT_S = 900               # a line that hangs fails the run, not CI's whole budget


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replace(line: str, port: int) -> str:
    """A Ray cluster on one machine: the head on a free `port`, HEAD this machine, and a
    node's agents on ports of their own (two nodes of one host collide on Ray's defaults)."""
    if line.startswith("ray start --head"):
        return line.replace(f"--port={RAY_PORT}", f"--port={port}")
    if "HEAD:" not in line:
        return line
    line = line.replace(f"HEAD:{RAY_PORT}", f"127.0.0.1:{port}")
    if line.startswith("ray start --address="):
        line += "".join(f" --{flag}={_free_port()}" for flag in (
            "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
            "metrics-export-port"))
    return line


def stop_ray(port: int) -> None:
    """Stop this cluster's processes only (`ray stop` stops every cluster of the machine):
    those whose command line names its port."""
    mark = re.compile(rf"gcs[-_]address=\S*:{port}\b|gcs_server_port={port}\b")
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and mark.search(line):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


def venv(clone: Path, env: dict[str, str]) -> None:
    """After the quick start's venv line: the venv sees the packages of the venv running this
    script (a .pth naming its site-packages; never the system's, which a new user's Python
    lacks), and is active for the lines after it (each line is a shell of its own)."""
    if sys.prefix == sys.base_prefix:
        raise SystemExit("readme_blocks: run it in the project's venv (.ci/run's), not the "
                         "system's Python")
    made = clone / ".venv"
    site = next((made / "lib").glob("python*/site-packages"))
    ours = dict.fromkeys(sysconfig.get_path(name) for name in ("purelib", "platlib"))
    (site / "readme-run.pth").write_text("\n".join(ours) + "\n")
    env.update(VIRTUAL_ENV=str(made), PATH=f"{made / 'bin'}{os.pathsep}{env['PATH']}")


def blocks(root: Path) -> list[tuple[str, str, str, str]]:
    """(doc, kind, body, prose before it) of every fenced block, in the docs' order."""
    found = []
    for doc in DOCS:
        text = (root / doc).read_text(encoding="utf-8")
        last = 0
        for match in FENCE.finditer(text):
            found.append((doc, match.group(1), match.group(2), text[last:match.start()]))
            last = match.end()
    return found


def lines_of(body: str) -> list[str]:
    """A shell block's command lines, each without its trailing comment."""
    return [re.split(r"\s{2,}#\s", line)[0].strip() for line in body.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def written_file(kind: str, prose: str, root: Path) -> str | None:
    """Where the prose before a Python or YAML block tells the user to put it: the last
    `path.py` / `path.yaml` it names in code that the repository does not hold yet (the
    prose may point at an existing file for reference)."""
    ext = {"python": "py", "yaml": "yaml"}.get(kind)
    named = re.findall(rf"`([\w./-]+\.{ext})`", prose) if ext else []
    new = [path for path in named if not (root / path).exists()]
    return new[-1] if new else None


def plan(root: Path) -> list[tuple[str, str]]:
    """What to do, in order: ("run", line), ("skip", line — why), ("write", path\\nbody)."""
    steps: list[tuple[str, str]] = []
    used = set()
    for doc, kind, body, prose in blocks(root):
        if kind in SHELLS:
            for line in lines_of(body):
                why = next((k for k in SKIP if line.startswith(k)), None)
                if why:
                    used.add(why)
                    steps.append(("skip", f"{line}  —  {SKIP[why]}"))
                else:
                    steps.append(("run", line))
        elif kind in ("python", "yaml") and doc == "README.md":
            path = written_file(kind, prose[-600:], root)
            if path:
                steps.append(("write", f"{path}\n{body}"))
                if kind == "yaml":      # the command the prose gives for it, right after
                    after = (root / doc).read_text(encoding="utf-8").split(body, 1)[1]
                    selected = re.search(r"then select it: `([^`]+)`", after[:400])
                    if selected:
                        steps.append(("run", selected.group(1)))
    stale = set(SKIP) - used
    if stale:
        raise SystemExit(f"readme_blocks: SKIP names lines no block holds: {sorted(stale)}")
    return steps


SMALL = {"processes": "2", "samples": "5", "adaptive_budget_s": "0"}


def fork(clone: Path) -> None:
    """The clone as a small fork (the module's doc), a git identity, which a fresh machine
    may lack, the Ray block's `h100` device, as its prose says, and a `main` branch for the
    pull-request line's merge base."""
    config = clone / "conf/config.yaml"
    text = config.read_text()
    assert "  - matrix: cpu\n" in text, "conf/config.yaml's default matrix moved"
    config.write_text(text.replace("  - matrix: cpu\n", "  - matrix: smoke\n"))
    smoke = clone / "conf/matrix/smoke.yaml"
    text = smoke.read_text()
    for key, value in SMALL.items():
        text, found = re.subn(rf"\n  {key}: \d+", f"\n  {key}: {value}", text)
        assert found == 1, f"conf/matrix/smoke.yaml: bench.{key} moved"
    smoke.write_text(text.replace("\nbench:\n", "\nbench:\n  cold_compile_processes: 1\n"))
    (clone / "conf/device/h100.yaml").write_text(
        "h100:\n  type: cuda\n  accelerator_type: H100\n  resources: {h100_box: 1}\n")
    for args in (["config", "user.email", "ci@torchgate.invalid"],
                 ["config", "user.name", "torchgate ci"], ["checkout", "-q", "-B", "main"],
                 ["add", "-A"], ["commit", "-qm", "a small fork"]):
        subprocess.run(["git", *args], cwd=clone, check=True)


def absent_cells(clone: Path) -> list[str]:
    """Records of GPU cells that `git add reports` would take, on a machine without one (the
    README: an absent device's cells are SKIPPED, listed in a .gitignore beside them)."""
    listed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--",
                             "reports"], cwd=clone, capture_output=True, text=True,
                            check=True).stdout.splitlines()
    return [entry[3:] for entry in listed if re.search(r"/(cuda|h100)-", entry)]


def gate_said_no(done: subprocess.CompletedProcess) -> bool:
    return done.returncode == 255 and "torchgate gate: failed:" in done.stderr


def run(root: Path, clone: Path) -> int:
    steps = plan(root)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCHGATE_MACHINE", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(DVC_NO_ANALYTICS="1", RAY_ADDRESS="")
    port = _free_port()
    started = time.monotonic()
    try:
        for what, text in steps:
            if what == "skip":
                print(f"readme: skipped: {text}", flush=True)
                continue
            if what == "write":
                path, body = text.split("\n", 1)
                (clone / path).write_text(body)
                print(f"readme: wrote {path}", flush=True)
                continue
            line = replace(text, port)
            t0 = time.monotonic()
            # A session of its own: a line that hangs is stopped with all it started.
            shell = subprocess.Popen(["bash", "-c", line], cwd=clone, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
            try:
                out, err = shell.communicate(timeout=LINE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(shell.pid, signal.SIGKILL)
                out, err = shell.communicate()
                print(f"readme: FAILED (still running after {LINE_TIMEOUT_S} s): {line}",
                      flush=True)
                print(out[-4000:], err[-4000:], sep="\n", file=sys.stderr)
                return 1
            done = subprocess.CompletedProcess(line, shell.returncode, out, err)
            took = time.monotonic() - t0
            repro = line.split()[:2] == ["dvc", "repro"] or " && dvc repro" in line
            ok = done.returncode == 0 or (repro and gate_said_no(done))
            print(f"readme: {'ran' if ok else 'FAILED'} ({took:.0f} s, exit "
                  f"{done.returncode}): {line}", flush=True)
            if not ok:
                print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
                return 1
            if line.startswith(VENV):
                venv(clone, env)
            added = re.match(r"git add ([^&;|]+)&& git commit", line)
            left = added and subprocess.run(
                ["git", "status", "--porcelain", "--", *added.group(1).split()], cwd=clone,
                capture_output=True, text=True, check=True).stdout
            if left:
                print(f"readme: after `{line}` the clone still holds:\n{left}",
                      file=sys.stderr)
                return 1
            absent = absent_cells(clone)
            if absent:
                print(f"readme: after `{line}` cells this machine cannot run left records "
                      f"to commit: {absent}", file=sys.stderr)
                return 1
    finally:
        stop_ray(port)
    print(f"readme: every block ran in {time.monotonic() - started:.0f} s", flush=True)
    return 0


def main(argv: list[str]) -> int:
    root = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="torchgate-readme-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
        fork(clone)
        return run(root, clone)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
