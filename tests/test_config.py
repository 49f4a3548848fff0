"""Configuration: params.yaml equals the composition of conf/, and bad input is one clear line."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from torchgate.compose import compose
from torchgate.core import config, machine
from torchgate.core.config.settings import MachineSettings
from torchgate.core.errors import UserError

from .projects import ROOT, committed_params, default_params


def test_committed_params_equal_the_composition_of_conf():
    """Equal but for the machine: the committed one names whichever machine composed it."""
    def unnamed(text):
        return re.sub(r"\nmachine:\n(  .*\n)+", "\n", text)
    assert unnamed(default_params()) == unnamed(committed_params()), (
        "params.yaml is stale: run `python -m torchgate.compose` and commit it")



@pytest.mark.parametrize("overrides", [[], ["matrix=pr", "workload=[mlp_train]"],
                                       ['candidate.pip=["torch==2.14.1"]']])
def test_compose_writes_what_dvc_exp_run_composes(tmp_path, overrides):
    """compose uses Hydra's public API; `dvc exp run -S` DVC's own composition: the same file."""
    from dvc.utils.hydra import compose_and_dump

    from torchgate.compose import CONF, PLUGINS
    ours, dvcs = tmp_path / "params.yaml", tmp_path / "dvc.yaml"
    compose(ours, overrides)
    compose_and_dump(dvcs, str(CONF), None, "config", str(PLUGINS), overrides)
    assert ours.read_text() == dvcs.read_text()

def test_a_machine_is_named_by_config_else_the_variable_else_its_hardware(tmp_path, monkeypatch):
    out = tmp_path / "params.yaml"
    assert compose(out, ["machine.name=gpu-box"]) == "gpu-box"
    assert config.load(out).machine == MachineSettings("gpu-box", False)
    assert compose(out, []) == "test-box"                 # TORCHGATE_MACHINE
    assert config.load(out).reports == Path("reports/test-box")
    monkeypatch.delenv("TORCHGATE_MACHINE")
    assert compose(out, []) == machine.derived_name()
    assert config.load(out).machine.derived
    before = out.read_text()
    with pytest.raises(UserError, match="cannot name a folder of reports/"):
        compose(out, ["machine.name=../up"])
    assert out.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["params.yaml"]


@pytest.mark.parametrize("cpu, cores, gpus, name", [
    ("AMD EPYC 7B13 64-Core Processor", 2, [], "amd-epyc-7b13-2c"),
    ("Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz", 16, ["NVIDIA H100 80GB HBM3"] * 8,
     "xeon-platinum-8480-16c-8xh100-80gb-hbm3"),
    (None, 8, [], "arm64-8c"),
])
def test_the_derived_name_says_cpu_cores_and_gpus(monkeypatch, cpu, cores, gpus, name):
    monkeypatch.setattr(machine, "cpu_model", lambda: cpu)
    monkeypatch.setattr(machine.platform, "processor", lambda: "")
    monkeypatch.setattr(machine.platform, "machine", lambda: "arm64")
    monkeypatch.setattr(machine, "usable_cores", lambda: cores)
    monkeypatch.setattr(machine, "nvidia_gpus", lambda: gpus)
    assert machine.derived_name() == name and machine.check_name(name) is None


def test_a_report_path_maps_to_where_it_lay_before_machines():
    assert machine.legacy("reports/box/bench/cpu-fp32.json") == Path("reports/bench/cpu-fp32.json")
    assert machine.legacy("reports/box/env/env.json") == Path("reports/env/env.json")
    assert machine.legacy("elsewhere/box/x.json") is None


@pytest.mark.parametrize("overrides, cells", [
    (["matrix=smoke"], ["cpu-fp32"]),
    ([], ["cpu-fp32", "cpu-bf16"]),
    (["matrix=gpu"], ["cuda-fp32", "cuda-tf32", "cuda-bf16"]),
    (["precision=[fp32,tf32]", "device=[cpu,cuda]"],
     ["cpu-fp32", "cpu-tf32", "cuda-fp32", "cuda-tf32"]),
])
def test_every_matrix_composes_into_a_valid_config(tmp_path, overrides, cells):
    out = tmp_path / "params.yaml"
    compose(out, overrides)
    cfg = config.load(out)
    assert [c.name for c in cfg.cells()] == cells
    raw = yaml.safe_load(out.read_text())
    assert raw["cells"]["devices"] == list(cfg.devices)  # what the DVC matrix iterates over


@pytest.mark.parametrize("override, message", [
    ("precision=fp8", "Could not find 'precision/fp8'. Valid options: amp_bf16, bf16, fp16, fp32, tf32."),
    ("device=tpu", "Valid options: cpu, cuda, mps, neuron, xpu."),
    ("workload=[nope]", "Could not load 'workload/nope'. Valid options: branchy, branchy_large, "),
    ("matrix=huge", "Valid options: cpu, gpu, models, models_gpu, pr, smoke."),
])
def test_an_unknown_option_names_the_valid_ones_in_one_line(override, message):
    run = subprocess.run([sys.executable, "-m", "torchgate.compose", override], cwd=ROOT.parent,
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT),
                                                              "PATH": "/usr/bin:/bin"})
    assert run.returncode == 2
    assert message in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_a_composition_the_stages_would_refuse_leaves_params_yaml_as_it_was(tmp_path):
    """bench.processes=0 composes (Hydra checks keys, not values): refused before it
    replaces params.yaml, not one `dvc repro` later."""
    out = tmp_path / "params.yaml"
    compose(out, [])
    before = out.read_text()
    with pytest.raises(UserError, match="bench.processes must be > 0, got 0"):
        compose(out, ["bench.processes=0"])
    assert out.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["params.yaml"]


def _raw():
    return yaml.safe_load(default_params())


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["bench"].update(processes=0), "bench.processes must be > 0, got 0"),
    (lambda r: r["bench"].update(samples=-3), "bench.samples must be > 0, got -3"),
    (lambda r: r["bench"].update(sample_size=3), "unknown key bench.sample_size; valid keys"),
    (lambda r: r["bench"].update(processes="five"),
     "bench.processes must be an integer, got 'five'"),
    (lambda r: r["bench"].update(processes=True), "bench.processes must be an integer, got True"),
    (lambda r: r["gate"].update(fail_on=["REGRESSED", "REGRESSION"]),
     "gate.fail_on[1] is 'REGRESSION'; valid choices: REGRESSED, FAILED, FLAKY, INCONCLUSIVE, "
     "NOT COMPARABLE, IMPROVED, EQUIVALENT, NEW, MISSING, SKIPPED, NOTHING_COMPARABLE"),
    (lambda r: r["gate"].update(fail_on="REGRESSED"),
     "gate.fail_on must be a list of strings, got 'REGRESSED'"),
    (lambda r: r["gate"].update(fail_on_regression=False),
     "gate.fail_on_regression was replaced by gate.fail_on, the list of verdicts that fail the "
     "run, e.g. gate.fail_on=[REGRESSED,FAILED,FLAKY,MISSING,NOTHING_COMPARABLE] ([] turns "
     "the gate off)"),
    (lambda r: r["compare"].update(allow_hardware_change="false"),
     "compare.allow_hardware_change must be true or false, got 'false'"),
    (lambda r: r["matrix"].update(modes="eager"),
     "matrix.modes must be a list of strings, got 'eager'"),
    (lambda r: r["matrix"].update(mode=["eager"]), "unknown key matrix.mode; valid keys: modes, name"),
    (lambda r: r["gate"].update(fail_onn=[]), "unknown key gate.fail_onn; valid keys: fail_on"),
    (lambda r: r["stats"]["delta"].update(steady=0.1),
     "unknown key stats.delta.steady; valid keys: comm_s, compile_instructions, first_call_s, first_call_warm_s, instructions, latency_p50_s, latency_p90_s, latency_p99_s, peak_bytes, steady_s, straggler, warmup_s"),
    (lambda r: r["stats"]["delta"].update(steady_s=1e300),
     "stats.delta.steady_s must be at most 10 (a relative change: 0.05 is 5 %), got 1e+300"),
    (lambda r: r["stats"]["delta"].update(steady_s="5%"),
     "stats.delta.steady_s must be a number, got '5%'"),
    (lambda r: r["baseline"].update(rev=3), "baseline.rev must be a string, got 3"),
    (lambda r: r["bench"].update(instructions="on"),
     "bench.instructions is 'on'; valid choices: auto, always, never"),
    (lambda r: r["candidate"].update(pyhton="/x"), "unknown key candidate.pyhton; valid keys: pip, python, rev"),
    (lambda r: r["baseline"].update(measure="sometimes"),
     "baseline.measure is 'sometimes'; valid choices: auto, recorded, rebuild"),
    (lambda r: r["candidate"].update(pip="torch==2.14.1"),
     "candidate.pip must be a list of strings, got 'torch==2.14.1'"),
    (lambda r: r["candidate"].update(pip=["--pre"]), "candidate.pip[0] is '--pre'"),
    (lambda r: r["candidate"].update(pip=["torch"], python="/usr/bin/python3"),
     "set candidate.python or candidate.pip, not both"),
    (lambda r: r["arms"].update(installer="conda"),
     "arms.installer is 'conda'; valid choices: auto, uv, pip"),
    (lambda r: r["numerics"].update(timeout_s=0), "numerics.timeout_s must be > 0, got 0.0"),
    (lambda r: r["cells"].update(devices=["cuda"]),
     "cells.devices is ['cuda'] but the selection is ['cpu']; recompose params.yaml"),
    (lambda r: r["device"]["cpu"].update(threads=1.5), "device.cpu.threads must be an integer"),
    (lambda r: r["device"]["cpu"].update(name="x"), "unknown key device.cpu.name"),
    (lambda r: r["precision"]["fp32"].update(autocast="yes"),
     "precision.fp32.autocast must be true or false, got 'yes'"),
    (lambda r: r["workload"]["matmul_relu"].update(_timeout_s_="long"),
     "workload.matmul_relu._timeout_s_ must be a number > 0, got 'long'"),
    (lambda r: r["workload"]["matmul_relu"].update(_timout_s_=5),
     "unknown key workload.matmul_relu._timout_s_; reserved keys are _target_, _timeout_s_, _latency_, _dynamic_"),
    (lambda r: r["device"]["cpu"].update(type="Neuron"),
     "device.cpu.type is 'Neuron'; give a torch device type: cpu, cuda, mps, xpu, or an "
     "out-of-tree backend's"),
    (lambda r: r["device"]["cpu"].update(modules="torch_neuronx"),
     "device.cpu.modules must be a list of strings"),
    (lambda r: r["workload"]["matmul_relu"].update(_latency_="yes"),
     "workload.matmul_relu._latency_ must be true or false, got 'yes'"),
    (lambda r: r["workload"]["matmul_relu"].update(_dynamic_="auto"),
     "workload.matmul_relu._dynamic_ must be true, false or null"),
    (lambda r: r["workload"]["matmul_relu"].update(_item_="Tokens!"),
     "workload.matmul_relu._item_ must name one item in lower case"),
    (lambda r: r["bench"].update(latency_calls=50), "bench.latency_calls must be >= 100"),
    (lambda r: r["device"]["cpu"].update(compile_backend="my backend"),
     "device.cpu.compile_backend is 'my backend'; give a torch.compile backend name"),
    (lambda r: r["precision"]["fp32"].update(dtype="fp8"), "precision.fp32.dtype is 'fp8'"),
    (lambda r: r["matrix"].update(modes=["eager", "jit"]), "matrix.modes[1] is 'jit'"),
    (lambda r: r["workload"]["matmul_relu"].pop("_target_"), "workload.matmul_relu needs `_target_"),
    (lambda r: r.pop("workload"), "params.yaml has no 'workload' selection"),
])
def test_bad_values_are_rejected_with_the_key_and_the_fix(edit, message):
    raw = _raw()
    edit(raw)
    with pytest.raises(UserError, match=None) as err:
        config.parse(raw)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_every_section_is_typed():
    """Each top-level section of params.yaml is a dataclass: no key is read unchecked."""
    cfg = config.parse(_raw())
    assert cfg.gate.fail_on == ("REGRESSED", "FAILED", "FLAKY", "MISSING",
                                 "NOTHING_COMPARABLE")
    assert cfg.compare.busy_share == 0.25
    assert cfg.stats.delta.first_call_s == 0.2 and cfg.matrix.modes == ("eager", "compiled")
    assert set(config.TOP_LEVEL) == set(_raw())


def test_an_empty_gate_fail_on_turns_the_gate_off_and_any_verdict_may_fail_it():
    raw = _raw()
    raw["gate"]["fail_on"] = []
    assert config.parse(raw).gate.fail_on == ()
    raw["gate"]["fail_on"] = ["NOT COMPARABLE", "INCONCLUSIVE"]
    assert config.parse(raw).gate.fail_on == ("NOT COMPARABLE", "INCONCLUSIVE")


def test_an_unknown_cell_names_the_valid_ones():
    cfg = config.parse(_raw())
    with pytest.raises(UserError, match=r"unknown device 'tpu'; this matrix has \['cpu'\]"):
        cfg.cell("tpu", "fp32")


def test_a_missing_or_broken_params_file_is_one_line(tmp_path):
    with pytest.raises(UserError, match="is missing"):
        config.load(tmp_path / "params.yaml")
    (tmp_path / "params.yaml").write_text("bench: [unclosed\n")
    with pytest.raises(UserError, match="is not valid YAML"):
        config.load(tmp_path / "params.yaml")


def test_a_workload_key_the_function_does_not_take_is_one_line():
    from torchgate.core.config.settings import WorkloadSpec
    from torchgate.core.config.targets import check_workloads
    typo = WorkloadSpec("matmul_relu", "torchgate.workloads.matmul_relu", {"sise": 64})
    mine = WorkloadSpec("mine", "not_a_module.fn", {"x": 1})
    with pytest.raises(UserError, match="workload.matmul_relu has no parameter 'sise'; "
                                        "torchgate.workloads.matmul_relu takes: size"):
        check_workloads([mine, typo], 120)
    assert check_workloads([mine], 120) == []     # left to the worker: a FAILED unit


@pytest.mark.parametrize("kwargs", [{"size": -5}, {"size": 0}, {"size": 2.5}])
def test_builtin_workloads_reject_nonpositive_sizes_with_the_key(kwargs):
    import torch

    from torchgate.workloads import matmul_relu
    with pytest.raises(ValueError, match=f"workload matmul_relu: size must be a positive "
                                         f"integer, got {kwargs['size']}"):
        matmul_relu(device=torch.device("cpu"), dtype=torch.float32, compile=lambda f: f,
                    seed=0, **kwargs)
