"""launcher.backend=ray on a simulated cluster (ray.cluster_utils.Cluster: nodes as processes
on this machine, one CPU each, custom resources naming them): each cell runs on the node it
names and gives the records a local run gives, a node lost mid-unit gets the unit again on
another, a resource no node offers skips its cell, and an unreachable cluster is one line."""
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from torchgate.compose import compose
from torchgate.core import records
from torchgate.core.records.schema import BenchRecord, NumericsRecord

from .projects import REPORTS, dvc, git

pytestmark = pytest.mark.slow     # a Ray cluster of two nodes, and dvc repro on it

if importlib.util.find_spec("ray") is None:
    pytest.skip("launcher.backend=ray needs ray: pip install -e '.[ray]'", allow_module_level=True)

MARKED = '''
import time
from pathlib import Path

import torch
from torchgate.workloads import Workload


def marked(*, device, dtype, compile, seed, marker, seconds):
    """The first time: says it started (a file), then takes `seconds` to build."""
    if not Path(marker).exists():
        Path(marker).write_text("started")
        time.sleep(seconds)
    x = torch.ones(64, 64, device=device, dtype=dtype)
    return Workload(step=lambda: x @ x, items=64)
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head offering host_a and a node offering host_b (and `pool`), every address on
    loopback: without the variable (read when ray is imported), Ray binds this machine's
    interface address. The nodes keep their arms in a cache of their own (`node_cache`), not
    the stages'."""
    env = pytest.MonkeyPatch()
    env.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from ray.cluster_utils import Cluster
    node_cache = tmp_path_factory.mktemp("node-cache")
    env.setenv("TORCHGATE_CACHE", str(node_cache))
    made = Cluster(initialize_head=True, connect=False,
                   head_node_args={"num_cpus": 1, "resources": {"host_a": 1}})
    made.nodes_by_name = {"host_a": made.head_node,
                          "host_b": made.add_node(num_cpus=1, resources={"host_b": 1, "pool": 1})}
    made.wait_for_nodes()
    assert made.address.startswith("127.0.0.1:"), made.address
    made.node_cache = node_cache
    yield made
    made.shutdown()
    env.undo()


def node_of(cluster, resource: str) -> str:
    return cluster.nodes_by_name[resource].node_id


def _devices(project, **resources):
    for name, resource in resources.items():
        (project / f"conf/device/{name}.yaml").write_text(
            f"{name}:\n  type: cpu\n  threads: 1\n  resources: {{{resource}: 1}}\n")


def _compose(project, devices, *extra):
    compose(project / "params.yaml", [f"device=[{','.join(devices)}]", "precision=[fp32]",
                                      "matrix.modes=[eager]", "bench.processes=1",
                                      "bench.cold_compile_processes=1",
                                      "bench.samples=3", "bench.adaptive_budget_s=0",
                                      "bench.instructions=never", "gate.fail_on=[]",
                                      # placement is tested here, not the busy rule: the two
                                      # backends' reports must not differ by a neighbour's load
                                      "compare.busy_share=1", *extra], conf=project / "conf")


def _keys(data, path=""):
    """Every key path of a JSON document (list items merged): its schema, less the values.
    Busy-machine readings are left out: a phase too short for /proc's clock ticks has none,
    wherever it ran (its CPU share is then an `unmeasured` reason, read as the same key); so
    is the window a unit held its Ray node (none locally)."""
    if isinstance(data, dict):
        return {p.replace(".unmeasured.", ".") for k, v in data.items()
                if not k.startswith("busy_") and k != "window_ms"
                for p in {f"{path}.{k}"} | _keys(v, f"{path}.{k}")}
    if isinstance(data, list):
        return {p for v in data for p in _keys(v, f"{path}[]")}
    return set()


def _reports(project):
    """Every report file as bytes (the pictures are PNGs)."""
    return {p.relative_to(project / REPORTS).as_posix(): p.read_bytes()
            for p in sorted((project / REPORTS).rglob("*")) if p.is_file()}


def test_each_cell_runs_on_the_node_it_names_and_gives_the_local_records(project, cluster):
    _devices(project, a="host_a", b="host_b")
    # Two processes a cell: the window in which both nodes are busy at once.
    cells = ("workload=[matmul_relu]", "workload.matmul_relu.size=64", "bench.processes=2")
    _compose(project, ["a", "b"], *cells)
    dvc("repro")
    local = _reports(project)
    _compose(project, ["a", "b"], *cells, "launcher.backend=ray",
             f"launcher.ray.address={cluster.address}")
    fleet = dvc("repro")
    on_ray = _reports(project)
    # A fleet run: the first bench stage measured both cells at once, the second took its own.
    assert "a fleet run: 2 cells at once" in fleet.stdout
    assert "measured with the matrix's other cells by an earlier bench stage" in fleet.stdout
    windows = {cell: [p["host"]["window_ms"] for p in json.loads(on_ray[f"bench/{cell}.json"])[
        "workloads"]["matmul_relu"]["processes"]] for cell in ("a-fp32", "b-fp32")}
    # The two nodes at once: each cell's processes span a window the other's overlaps (a
    # first process each need not: a loaded machine can start one node's worker late).
    (a_start, a_end), (b_start, b_end) = (
        (min(s for s, _ in w), max(e for _, e in w)) for w in windows.values())
    assert max(a_start, b_start) < min(a_end, b_end), windows

    assert local.keys() == on_ray.keys()
    rows = [{(r["stage"], r["cell"], r["workload"], r["mode"], r["metric"], r["verdict"])
             for r in json.loads(reports["compare.json"])["rows"]} for reports in (local, on_ray)]
    assert rows[0] == rows[1] and rows[0]
    for cell, resource in (("a-fp32", "host_a"), ("b-fp32", "host_b")):
        node = node_of(cluster, resource)
        bench = {how: json.loads(r[f"bench/{cell}.json"]) for how, r in (("local", local),
                                                                       ("ray", on_ray))}
        numerics = {how: json.loads(r[f"numerics/{cell}.json"]) for how, r in (("local", local),
                                                                             ("ray", on_ray))}
        ran_on = [p["host"]["node"] for p in bench["ray"]["workloads"]["matmul_relu"]["processes"]]
        ran_on += [h["node"] for h in numerics["ray"]["hosts"].values()]
        assert ran_on and set(ran_on) == {node}, cell          # every unit on its node
        assert {p["host"]["node"] for p in bench["local"]["workloads"]["matmul_relu"]["processes"]
                } == {None}
        for kind, cls, pair in (("bench", BenchRecord, bench),
                                ("numerics", NumericsRecord, numerics)):
            assert _keys(pair["local"]) == _keys(pair["ray"])
            for how, data in pair.items():          # one schema version and dataclass reads both
                assert data["schema_version"] == records.SCHEMA[kind]
                records.parse_record(json.dumps(data), cls, f"{how} {kind}/{cell}.json")
        # The numerics outputs, bit for bit: digests, fingerprints and errors.
        assert numerics["local"]["workloads"] == numerics["ray"]["workloads"]


def test_two_cells_on_one_node_take_turns_in_a_fleet_run(project, cluster):
    """As DVC runs bench stages (DVC_STAGE set, a shell between): the first measures both
    cells, the second takes its record; every unit held host_a's node alone."""
    _devices(project, a="host_a", a2="host_a")
    _compose(project, ["a", "a2"], "workload=[matmul_relu]", "workload.matmul_relu.size=64",
             "bench.processes=2", "launcher.backend=ray", f"launcher.ray.address={cluster.address}")
    stage = {**os.environ, "DVC_STAGE": "bench"}
    runs = [subprocess.run(["sh", "-c", f"{sys.executable} -m torchgate.bench --device {d} "
                            "--precision fp32; true"], capture_output=True, text=True, env=stage)
            for d in ("a", "a2")]
    assert "a fleet run: 2 cells at once" in runs[0].stdout, runs[0].stdout + runs[0].stderr
    assert "by an earlier bench stage" in runs[1].stdout, runs[1].stdout + runs[1].stderr
    windows = sorted(p["host"]["window_ms"] for cell in ("a-fp32", "a2-fp32") for p in json.loads(
        (project / REPORTS / f"bench/{cell}.json").read_text())["workloads"]["matmul_relu"][
        "processes"])
    assert len(windows) == 4
    assert all(end <= start for (_, end), (start, _) in zip(windows, windows[1:])), windows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_cell_no_node_offers_is_skipped_and_an_unreachable_cluster_is_one_line(project,
                                                                               cluster):
    _devices(project, c="host_c")
    _compose(project, ["c"], "workload=[matmul_relu]", "launcher.backend=ray",
             f"launcher.ray.address={cluster.address}")
    skipped = subprocess.run([sys.executable, "-m", "torchgate.bench", "--device", "c",
                              "--precision", "fp32"], capture_output=True, text=True)
    assert skipped.returncode == 0, skipped.stderr
    record = json.loads((project / "reports/test-box/bench/c-fp32.json").read_text())
    assert (record["status"], record["reason"]) == ("SKIPPED", "no node offers {CPU: 1, host_c: 1}")

    nobody = f"127.0.0.1:{_free_port()}"
    _compose(project, ["c"], "workload=[matmul_relu]", "launcher.backend=ray",
             f"launcher.ray.address={nobody}")
    down = subprocess.run([sys.executable, "-m", "torchgate.bench", "--device", "c",
                           "--precision", "fp32"], capture_output=True, text=True)
    assert down.returncode == 2
    assert down.stderr.strip().splitlines() == [
        f"torchgate bench: error: the Ray cluster at {nobody} is unreachable (Connection "
        "refused); start its head with `ray start --head` there, or set launcher.ray.address "
        "(or launcher.backend=local)"]


def test_a_lock_step_pair_runs_on_one_node_with_the_other_revision_unpacked_there(
        project, cluster, tmp_path):
    _devices(project, b="host_b")
    _compose(project, ["b"], "workload=[matmul_relu]", "workload.matmul_relu.size=64",
             "candidate.rev=HEAD", "launcher.backend=ray",
             f"launcher.ray.address={cluster.address}")
    git("add", "-A", cwd=project)
    git("commit", "-qm", "the candidate's revision", cwd=project)
    here = {**os.environ, "TORCHGATE_CACHE": str(tmp_path / "stage-cache")}
    bench = subprocess.run([sys.executable, "-m", "torchgate.bench", "--device", "b",
                            "--precision", "fp32"], capture_output=True, text=True, env=here)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    record = json.loads((project / "reports/test-box/bench/b-fp32.json").read_text())
    assert record["ab"]["interleaved"]
    (now,), (other,) = (arm["matmul_relu"]["processes"] for arm in (
        record["workloads"], record["ab"]["baseline"]["workloads"]))
    assert now["status"] == other["status"] == "OK" and now["round"] == other["round"] == 0
    assert now["host"]["node"] == other["host"]["node"] == node_of(cluster, "host_b")
    commit = git("rev-parse", "HEAD", cwd=project).stdout.strip()
    assert (cluster.node_cache / "code" / commit / "stages/workloads/__init__.py").is_file()


def test_a_node_lost_mid_unit_is_retried_on_another(project, cluster, tmp_path):
    """Last: it takes the host_b node away. Only that node offers `pool` when the unit starts;
    another joins before it is lost."""
    marker = tmp_path / "started"
    (project / "stages/workloads/my_workloads.py").write_text(MARKED)
    (project / "conf/workload/marked.yaml").write_text(
        f"marked:\n  _target_: torchgate.workloads.my_workloads.marked\n  marker: {marker}\n"
        "  seconds: 10\n")
    _devices(project, p="pool")
    _compose(project, ["p"], "workload=[marked]", "bench.processes=1", "launcher.backend=ray",
             f"launcher.ray.address={cluster.address}")
    lost = node_of(cluster, "host_b")
    stage = subprocess.Popen([sys.executable, "-m", "torchgate.bench", "--device", "p",
                              "--precision", "fp32"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        while not marker.exists() and stage.poll() is None:
            time.sleep(0.1)
        assert stage.poll() is None, stage.stdout.read()
        spare = cluster.add_node(num_cpus=1, resources={"pool": 1})
        cluster.remove_node(cluster.nodes_by_name.pop("host_b"), allow_graceful=False)
        out, _ = stage.communicate(timeout=120)
    finally:
        stage.kill()
    assert stage.returncode == 0, out
    (proc,) = json.loads((project / "reports/test-box/bench/p-fp32.json").read_text()
                         )["workloads"]["marked"]["processes"]
    assert proc["status"] == "OK"
    assert proc["host"]["node"] == spare.node_id
    assert proc["host"]["retried"].startswith("NodeDiedError: ") and lost in proc["host"]["retried"]
