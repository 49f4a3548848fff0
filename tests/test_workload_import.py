"""A workload module that misbehaves at import (sys.exit, os._exit, a hang) is that workload's
failure: the stage reads a plain `def` from its source, any other target's signature in a
child process with a time limit, and carries on."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchgate.compose import compose
from torchgate.core.config import targets
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.config.targets import check_workloads, load_target, signatures
from torchgate.core.errors import UserError
from torchgate.launch import local

from .jobs import job, quick

MODULES = {
    "exits_at_import": "import sys\nsys.exit(0)\n",
    "quits_at_import": "import os\nprint('bye')\nos._exit(0)\n",
    "hangs_at_import": "import time\ntime.sleep(3600)\n",
}
GOOD = "torchgate.workloads.matmul_relu"
# Bound by an assignment, the factory's signature is known only by importing its module.
FACTORY = "\n\nbuild = lambda **kwargs: None\n"


@pytest.fixture
def modules(tmp_path, monkeypatch):
    for name, body in MODULES.items():
        (tmp_path / f"{name}.py").write_text(body + FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_module_that_calls_sys_exit_at_import_is_one_line_and_the_check_goes_on(modules):
    found = signatures(["exits_at_import.build", GOOD], 120)
    assert found["exits_at_import.build"] == {"error": (
        "cannot import workload _target_ 'exits_at_import.build': the module called "
        "sys.exit(0) while being imported")}
    assert "size" in found[GOOD]["takes"]
    with pytest.raises(ImportError, match=r"the module called sys.exit\(0\) while being "
                                          r"imported"):
        load_target("exits_at_import.build")           # in a worker: that workload's ERROR


def test_a_module_that_ends_the_process_at_import_is_named(modules):
    found = signatures(["quits_at_import.build", GOOD], 120)
    assert found == {"quits_at_import.build": {
        "error": "importing it ended the process (exit status 0)"}}


def test_a_module_that_hangs_at_import_is_given_up_after_the_time_limit(modules,
                                                                        monkeypatch):
    started_ones = []

    class Spy(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started_ones.append(self.pid)
    monkeypatch.setattr(targets.subprocess, "Popen", Spy)
    started = time.perf_counter()
    notes = check_workloads([WorkloadSpec("slow", "hangs_at_import.build")], 2)
    assert time.perf_counter() - started < 10
    assert notes == [("workload slow: importing hangs_at_import.build did not finish within "
                      "2 s; its processes will time out")]
    assert len(started_ones) == 1 and not Path(f"/proc/{started_ones[0]}").exists()


def test_a_plain_def_is_read_from_its_source_without_importing_its_module(tmp_path,
                                                                         monkeypatch):
    (tmp_path / "plain.py").write_text(
        "import time\ntime.sleep(3600)\n\ndef build(a, /, b, *rest, device, c=1, **kw):\n"
        "    pass\n\ndef strict(*, device, size=3):\n    pass\n")
    (tmp_path / "other.py").write_text(
        "import functools\nfrom plain import strict as again\n\n@functools.cache\n"
        "def wrapped(size):\n    pass\n\ndef twice():\n    pass\n\ntwice = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    read = lambda target: targets.source_signature(target, sys.path)  # noqa: E731
    assert read("plain.build") == {"takes": ["a", "b", "rest", "device", "c", "kw"],
                                   "any": True}
    assert read("plain.strict") == {"takes": ["device", "size"], "any": False}
    # What the source alone cannot tell is the child's to read by importing.
    for target in ("other.wrapped", "other.again", "other.twice", "plain.missing",
                   "no_such_module.build", "build"):
        assert read(target) is None, target

    started_ones = []
    monkeypatch.setattr(targets.subprocess, "Popen", lambda *a, **k: started_ones.append(a))
    started = time.perf_counter()
    assert check_workloads([WorkloadSpec("hangs", "plain.build", {"x": 1})], 2) == []
    with pytest.raises(UserError, match="workload.typo has no parameter 'sise'; plain.strict "
                                        "takes: size"):
        check_workloads([WorkloadSpec("typo", "plain.strict", {"sise": 4})], 2)
    assert started_ones == [] and time.perf_counter() - started < 1   # no child, no import


@pytest.mark.slow
def test_a_bench_stage_measures_the_others_and_records_each_import_failure(project):
    for name, body in MODULES.items():
        (project / "stages" / "workloads" / f"{name}.py").write_text(    # tracked by the stage
            body + FACTORY)
    conf = project / "conf" / "workload"
    (conf / "exits.yaml").write_text(
        "exits:\n  _target_: torchgate.workloads.exits_at_import.build\n")
    (conf / "hangs.yaml").write_text(
        "hangs:\n  _target_: torchgate.workloads.hangs_at_import.build\n  _timeout_s_: 4\n")
    compose(project / "params.yaml", ["matrix=smoke", "workload=[matmul_relu,exits,hangs]",
                                      "bench.processes=1", "bench.cold_compile_processes=1",
                                      "bench.samples=3",
                                      "bench.timeout_s=10", "bench.adaptive_budget_s=0"],
            conf=project / "conf")
    run = subprocess.run([sys.executable, "-m", "torchgate.bench", "--device", "cpu",
                          "--precision", "fp32"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "torchgate bench: workload hangs: importing torchgate.workloads.hangs_at_import.build " \
           "did not finish within 10 s; its processes will time out" in run.stdout
    bench = json.loads((project / "reports/test-box/bench/cpu-fp32.json").read_text())
    first = {name: w["processes"][0] for name, w in bench["workloads"].items()}
    assert first["matmul_relu"]["modes"]["eager"]["status"] == "OK"
    exits = first["exits"]
    got = exits["modes"]["eager"] if exits["status"] == "OK" else exits
    assert got["status"] == "ERROR" and "the module called sys.exit(0) while being imported" \
        in got["error"]
    assert first["hangs"]["status"] == "TIMEOUT"
    assert "time limit, still importing torchgate.workloads.hangs_at_import.build" in first[
        "hangs"]["error"]


@pytest.mark.parametrize("paired", [False, True])
def test_a_worker_hanging_at_a_plain_defs_import_stops_at_the_import_limit(tmp_path,
                                                                           monkeypatch, paired):
    """A plain def is read from its source, so only the worker imports its module: a module
    that waits at import is stopped at bench.import_timeout_s with what it was doing, alone
    or in a lock-step pair, whose other arm is measured."""
    (tmp_path / "plain_hang.py").write_text("import time\ntime.sleep(3600)\n\n"
                                            "def build(device, dtype):\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    hangs = job("plain_hang.build", timing=quick(import_timeout_s=6))
    started = time.perf_counter()
    if paired:
        good = job("torchgate.workloads.matmul_relu", timing=quick(import_timeout_s=60))
        raw, other = local.run_interleaved([(hangs, None), (good, None)], timeout_s=120)
        assert other["status"] == "OK", other
    else:
        raw = local.run_worker(hangs, timeout_s=120)
    assert time.perf_counter() - started < 60
    assert raw["status"] == "TIMEOUT"
    assert raw["error"].startswith("importing plain_hang.build did not finish within the 6 s "
                                   "import limit: does the module wait at import"), raw["error"]
