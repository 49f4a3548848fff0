"""The README's Ray block run as written, on one machine: `ray start` for the head and for a
node that names its hardware, then the block's `dvc exp run` on that cluster. Replaced, and
only that, what one machine cannot be: HEAD is this machine on a free port, and the second node
keeps its own agent ports off the head's (two nodes of one host would collide on Ray's fixed
defaults). The block's `h100` device is written as its prose says (conf/device/h100.yaml);
with no GPU in the cluster its cell is skipped, saying so, and the CPU cell is measured."""
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from .projects import git
from .test_readme import readme_commands

pytestmark = pytest.mark.slow     # a Ray cluster of two nodes, and a dvc exp run on it

if importlib.util.find_spec("ray") is None:
    pytest.skip("the README's Ray block needs ray: pip install -e '.[ray]'",
                allow_module_level=True)

H100 = "h100:\n  type: cuda\n  accelerator_type: H100\n  resources: {h100_box: 1}\n"
# The block on a tiny matrix where it allows (its own line, with the smoke matrix's cell
# settings appended: the default matrix is the same command at 12 minutes).
SMALL = " -S matrix=smoke -S bench.processes=2 -S bench.adaptive_budget_s=0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(port: int) -> None:
    """Stop this cluster's processes only (`ray stop` would stop every cluster on the
    machine, another test's too): those whose command line names its GCS port."""
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


def test_the_readmes_ray_block_runs_as_written(project):
    install, head, node, run = readme_commands("## The matrix on a Ray cluster")
    assert install == "pip install -e '.[ray]'"          # this suite's own install
    assert run.startswith("dvc exp run -S launcher.backend=ray")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    lines = [head.replace("--port=6379", f"--port={port}"),
             node.replace("HEAD:6379", address) + f" --dashboard-agent-listen-port={_free_port()}"
             f" --dashboard-agent-grpc-port={_free_port()} --metrics-export-port={_free_port()}",
             run.replace("HEAD:6379", address) + SMALL]
    assert all("HEAD" not in line for line in lines)
    (project / "conf/device/h100.yaml").write_text(H100)
    git("add", "-A", cwd=project)
    git("commit", "-qm", "the clone, with the block's device", cwd=project)
    env = {**os.environ, "RAY_ADDRESS": ""}
    try:
        for line in lines:
            done = subprocess.run(["bash", "-c", line], cwd=project, capture_output=True,
                                  text=True, env=env, timeout=600)
            assert done.returncode == 0, (line, done.stdout[-3000:], done.stderr[-3000:])
    finally:
        _stop(port)
    machine = next(p for p in (project / "reports").iterdir() if (p / "bench").is_dir())
    cpu = json.loads((machine / "bench/cpu-fp32.json").read_text())
    processes = cpu["workloads"]["matmul_relu"]["processes"]
    assert [p["status"] for p in processes] == ["OK", "OK"]
    assert all(p["host"]["node"] for p in processes)           # each ran on a Ray node
    h100 = json.loads((machine / "bench/h100-fp32.json").read_text())
    assert h100["status"] == "SKIPPED", h100
    assert h100["reason"].startswith("no node offers {CPU: 1, GPU: 1, h100_box: 1")
    assert "SKIPPED: no node offers" in (machine / "summary.md").read_text()
