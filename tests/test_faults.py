"""Fault injection through the real stages: every failure kind is a recorded status with its
message, the good workloads' results are complete, and an interrupted stage leaves no partial
file and no orphan worker."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchgate.compose import compose

from .projects import run_module

HERE = Path(__file__).resolve().parent

FAULTS = {  # workload -> (status, words of its message)
    "abort": ("CRASHED", "killed by signal SIGABRT"),
    "segfault": ("CRASHED", "killed by signal SIGSEGV"),
    "out_of_memory": ("OOM", "can't allocate memory"),
    "memory_error": ("OOM", "MemoryError: simulated"),
    "hang": ("TIMEOUT", "no result within the 4 s time limit"),
    "raises": ("ERROR", "shape mismatch in layer 3"),
    "import_error": ("ERROR", "cannot import workload _target_ "
                     "'torchgate.workloads.fault_import_error.build'"),
    "returns_nan": ("NONFINITE", "NaN/Inf"),
}


def write_workloads(project: Path) -> None:
    for name in ("fault_workloads.py", "fault_import_error.py"):
        shutil.copy(HERE / name, project / "stages" / "workloads" / name)
    conf = project / "conf" / "workload"
    for name in ["good", "good_too", *FAULTS]:
        target = {"import_error": "torchgate.workloads.fault_import_error.build",
                  "good_too": "torchgate.workloads.fault_workloads.good"
                  }.get(name, f"torchgate.workloads.fault_workloads.{name}")
        extra = "  _timeout_s_: 4\n" if name == "hang" else ""
        (conf / f"{name}.yaml").write_text(f"{name}:\n  _target_: {target}\n{extra}")


@pytest.mark.slow
def test_every_failure_kind_is_a_status_and_the_rest_completes(project):
    write_workloads(project)
    compose(project / "params.yaml", ["matrix=smoke", f"workload=[good,good_too,{','.join(FAULTS)}]",
                                      "bench.processes=2", "bench.samples=3",
                                      "bench.adaptive_budget_s=0"], conf=project / "conf")
    run_module("torchgate.env")
    run_module("torchgate.bench", "--device", "cpu", "--precision", "fp32")
    run_module("torchgate.numerics", "--device", "cpu", "--precision", "fp32")
    run_module("torchgate.compare")
    run_module("torchgate.report")

    bench = json.loads((project / "reports/test-box/bench/cpu-fp32.json").read_text())
    for name in ("good", "good_too"):
        procs = bench["workloads"][name]["processes"]
        assert len(procs) == 2 and all(len(p["modes"]["eager"]["steady_s"]) == 3 for p in procs)
    for name, (status, words) in FAULTS.items():
        procs = bench["workloads"][name]["processes"]
        assert len(procs) == 1, f"{name}: a failed workload is not started again"
        proc = procs[0]
        got = proc["status"] if proc["status"] != "OK" else proc["modes"]["eager"]["status"]
        error = proc.get("error") or proc["modes"]["eager"]["error"]
        assert (got, words in error) == (status, True), (name, got, error)

    numerics = json.loads((project / "reports/test-box/numerics/cpu-fp32.json").read_text())
    assert numerics["workloads"]["good"]["eager"]["status"] == "PASS"
    assert numerics["workloads"]["returns_nan"]["eager"]["status"] == "NONFINITE"
    assert "NaN/Inf" in numerics["workloads"]["returns_nan"]["eager"]["problems"][0]

    summary = (project / "reports/test-box/summary.md").read_text()
    for name, (status, words) in FAULTS.items():
        line = next(l for l in summary.splitlines() if f"| {name} " in l and "bench" in l)
        assert "FAILED" in line and status in line and words.split("'")[0] in line, line


@pytest.mark.slow
def test_an_interrupted_stage_leaves_the_previous_report_and_no_worker(project, tmp_path):
    write_workloads(project)
    pid_file = tmp_path / "worker.pid"
    (project / "conf/workload/hang.yaml").write_text(
        f"hang:\n  _target_: torchgate.workloads.fault_workloads.hang\n  pid_file: {pid_file}\n")
    compose(project / "params.yaml", ["matrix=smoke", "workload=[hang]"], conf=project / "conf")
    previous = project / "reports/test-box/bench/cpu-fp32.json"
    previous.parent.mkdir(parents=True)
    previous.write_text('{"previous": true}\n')
    proc = subprocess.Popen([sys.executable, "-m", "torchgate.bench", "--device", "cpu",
                             "--precision", "fp32"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    for _ in range(600):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    worker = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)                               # the worker died with its stage
    assert previous.read_text() == '{"previous": true}\n'
    assert [p.name for p in previous.parent.iterdir()] == ["cpu-fp32.json"]  # no temp files
