"""Where units run, without a cluster: the launcher section and a device's resource request,
"no node offers {...}", and timings judged by the hardware each process recorded."""
import dataclasses
import random
import sys

import pytest
import yaml

from torchgate.core import config, records
from torchgate.core.errors import UserError
from torchgate.core.records.schema import BenchRecord, Hardware, Host
from torchgate.core.vocabulary import Verdict
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish
from torchgate.launch import ray_placement as launch
from torchgate.launch.ray_backend import unavailable

from .projects import ROOT
from .records import DELTA, bench, process

EPYC = Hardware("AMD EPYC", (), 2)
XEON = Hardware("Intel Xeon", (), 2)


def _raw():
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def test_the_default_is_local_and_a_device_may_name_its_hardware():
    cfg = config.parse(_raw())
    assert cfg.launcher.backend == "local" and cfg.launcher.ray.address == "auto"
    raw = _raw()
    raw["launcher"]["backend"] = "ray"
    raw["device"]["cpu"].update(threads=2, resources={"host_a": 1})
    cfg = config.parse(raw)
    device = cfg.devices["cpu"]
    assert launch.request(device.type, device.threads, device) == {
        "num_cpus": 2, "num_gpus": 0, "resources": {"host_a": 1}}


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["launcher"].update(backend="slurm"),
     "launcher.backend is 'slurm'; set it to local (worker processes on this machine) or ray"),
    (lambda r: r["launcher"]["ray"].update(adress="auto"), "unknown key launcher.ray.adress"),
    (lambda r: r["device"]["cpu"].update(num_gpus=0.5),
     "device.cpu.num_gpus must be a whole number >= 0, got 0.5: units sharing a GPU"),
    (lambda r: r["device"]["cpu"].update(resources={"host_a": 0}),
     "device.cpu.resources.host_a must be a number > 0, got 0"),
    (lambda r: r["device"]["cpu"].update(resources=["host_a"]),
     "device.cpu.resources must be a mapping"),
])
def test_a_bad_launcher_or_placement_is_one_line(edit, message):
    raw = _raw()
    edit(raw)
    with pytest.raises(UserError) as err:
        config.parse(raw)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_what_a_unit_asks_of_a_node():
    gpu = config.DeviceSpec("cuda", "cuda", accelerator_type="H100")
    asked = launch.request("cuda", 0, gpu)
    assert asked == {"num_cpus": 1, "num_gpus": 1, "accelerator_type": "H100"}
    assert launch.describe(launch.offered(asked)) == "{CPU: 1, GPU: 1, accelerator_type:H100}"
    cpu_only = config.DeviceSpec("cuda", "cuda", num_gpus=0)
    assert launch.request("cuda", 4, cpu_only)["num_gpus"] == 0


class FakeRay:
    def __init__(self, *nodes):
        self.listed = [{"NodeID": f"n{i}", "Alive": alive, "Resources": res}
                       for i, (res, alive) in enumerate(nodes)]

    def nodes(self):
        return self.listed


def test_no_node_offers_what_a_cell_names():
    cluster = FakeRay(({"CPU": 1, "host_a": 1}, True), ({"CPU": 1, "host_b": 1}, True),
                      ({"CPU": 8, "host_c": 1}, False))
    assert unavailable(cluster, {"CPU": 1, "host_a": 1}) is None
    assert unavailable(cluster, {"CPU": 1, "host_c": 1}) == "no node offers {CPU: 1, host_c: 1}"
    assert unavailable(cluster, {"CPU": 2}) == "no node offers {CPU: 2}"
    # A node just lost is not counted, even while the cluster still lists it as alive.
    assert unavailable(cluster, {"CPU": 1, "host_a": 1}, lost=("n0",)) is not None


def _on(hardware_by_process, seed=0, name="h", steady=1e-3) -> BenchRecord:
    rng = random.Random(seed)
    procs = [dataclasses.replace(process(rng=rng, steady=steady),
                                 host=None if hw is None else Host(f"{name}{i}", "n", hw))
             for i, hw in enumerate(hardware_by_process)]
    return bench({"w": procs})


def rows(now, base, env_reason=None, **kw):
    drafts = bench_rows("cpu-fp32", now, base, DELTA, env_reason, **kw)
    return {r.metric: r for r in finish(drafts, alpha=0.05, power=0.8).rows}


def test_a_side_on_mixed_hardware_is_not_comparable_with_the_reason():
    mixed = rows(_on([EPYC, EPYC, XEON, XEON, XEON]), _on([EPYC] * 5, seed=1))
    steady = mixed["steady_s"]
    assert steady.verdict == Verdict.NOT_COMPARABLE
    assert steady.note.startswith("this run's processes ran on different hardware (cpu_model: "
                                  "AMD EPYC on h0/h1, Intel Xeon on h2/h3/h4)")
    assert mixed["peak_bytes"].verdict == Verdict.EQUIVALENT      # memory is still compared
    base_mixed = rows(_on([EPYC] * 5), _on([XEON, EPYC, EPYC, EPYC, EPYC], seed=1))
    assert base_mixed["steady_s"].note.startswith("the baseline's processes ran on different")


def test_the_processes_hardware_decides_between_the_sides_and_old_records_fall_back():
    moved = rows(_on([XEON] * 5), _on([EPYC] * 5, seed=1))
    assert moved["steady_s"].verdict == Verdict.NOT_COMPARABLE
    assert moved["steady_s"].note == "hardware changed (cpu_model: AMD EPYC -> Intel Xeon)"
    allowed = rows(_on([XEON] * 5), _on([EPYC] * 5, seed=1), allow_hardware_change=True)
    assert allowed["steady_s"].verdict == Verdict.EQUIVALENT
    # Both sides' processes ran on the same hardware: the driving machine's env does not matter.
    same = rows(_on([EPYC] * 5), _on([EPYC] * 5, seed=1), env_reason="hardware changed (x)")
    assert same["steady_s"].verdict == Verdict.EQUIVALENT
    # A baseline recorded before processes said where they ran: the environments decide.
    old = rows(_on([EPYC] * 5), _on([None] * 5, seed=1), env_reason="hardware changed (x)")
    assert old["steady_s"].note == "hardware changed (x)"


def test_a_process_says_where_it_ran_and_an_older_record_reads_without_it(tmp_path):
    record = _on([EPYC, XEON])
    path = tmp_path / "c.json"
    records.write_record(path, record)
    again = records.load_record(path, BenchRecord)
    assert again.workloads["w"].processes[1].host == Host("h1", "n", XEON)
    data = records.record_data(record)
    assert data["schema_version"] == records.SCHEMA["bench"]
    for proc in data["workloads"]["w"]["processes"]:
        del proc["host"]
    older = records.parse_record(records.json.dumps({**data, "schema_version": 5}),
                                 BenchRecord, "old.json")
    assert older.workloads["w"].processes[0].host is None


def test_a_node_builds_an_arms_venv_from_its_spec_and_unpacks_its_checkout(tmp_path):
    """What a Ray task does on its node before the unit runs (launch.ray_backend.on_node):
    the venv the driver planned, under the node's cache, and the other revision's code."""
    from torchgate.arms.checkout import pack, unpack
    from torchgate.arms.venv import VenvSpec, python_of
    from torchgate.core.typed import to_data
    from torchgate.launch.ray_backend import _ready_python

    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    spec = VenvSpec(here, installer="uv")              # no packages: built in a blink
    node_cache = tmp_path / "node"
    python = _ready_python("/driver/cache/venvs/x/bin/python", to_data(spec), str(node_cache))
    assert python == str(python_of(spec, node_cache)) and (node_cache / "venvs").is_dir()
    assert _ready_python("/usr/bin/python3", None, str(node_cache)) == "/usr/bin/python3"

    code = tmp_path / "driver" / "code" / "abc123"
    (code / "stages" / "workloads").mkdir(parents=True)
    (code / "stages" / "workloads" / "__init__.py").write_text("X = 1\n")
    there = unpack(pack(code), node_cache / "code" / "abc123")
    assert (there / "stages" / "workloads" / "__init__.py").read_text() == "X = 1\n"


def test_a_worker_whose_interpreter_is_gone_is_an_error_not_a_lost_stage(tmp_path):
    """A venv removed while the run used it: the unit's process is ERROR with what happened,
    alone or in a lock-step pair, and the stage goes on."""
    from torchgate.core.config import DeviceSpec, PrecisionSpec
    from torchgate.core.config.settings import WorkloadSpec
    from torchgate.core.records.job import Job, Timing
    from torchgate.launch.local import run_interleaved, run_worker

    def _eager_job() -> Job:
        spec = WorkloadSpec("m", "torchgate.workloads.matmul_relu", {"size": 8})
        return Job("bench", 0, DeviceSpec("cpu", "cpu"), PrecisionSpec("fp32", "float32"),
                   (spec,), ("eager",), Timing(3, 0.005, 0.02, 3, 1.0))
    gone = str(tmp_path / "venv" / "bin" / "python")
    raw = run_worker(_eager_job(), timeout_s=30, python=gone)
    assert raw["status"] == "ERROR" and raw["error"].startswith(
        f"cannot start a worker with {gone}: No such file or directory; was its venv removed")
    pair = run_interleaved([(_eager_job(), gone), (_eager_job(), gone)], timeout_s=30)
    assert [r["status"] for r in pair] == ["ERROR", "ERROR"]
