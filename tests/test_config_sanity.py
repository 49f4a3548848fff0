"""Configuration values that pass each range check and still make no sense: non-finite numbers
(NaN passes `value < low`) and settings that contradict each other. Each is one line naming
the key and what to fix; records keep their NaN measurements."""
import json
import math

import pytest
import yaml

from tests.records import record
from torchgate.core import config
from torchgate.core.errors import UserError
from torchgate.core.records import dumps, parse_record, record_data
from torchgate.core.records.schema import BenchRecord
from torchgate.core.typed import from_data

from .projects import default_params


def _raw():
    return yaml.safe_load(default_params())


def _rejected(edit) -> str:
    raw = _raw()
    edit(raw)
    with pytest.raises(UserError) as err:
        config.parse(raw)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("value", [math.nan, "NaN", math.inf, "Infinity", "-Infinity"])
@pytest.mark.parametrize("section, key", [
    ("stats.delta", "steady_s"), ("bench", "timeout_s"), ("stats", "run_spread"),
    ("numerics", "timeout_s"), ("launcher.ray", "connect_timeout_s")])
def test_a_non_finite_number_in_the_configuration_is_one_line_naming_the_key(
        section, key, value):
    def edit(raw):
        node = raw
        for part in section.split("."):
            node = node.setdefault(part, {})
        node[key] = value
    message = _rejected(edit)
    assert message.startswith(f"{section}.{key} must be a finite number, got "), message


@pytest.mark.parametrize("value", [math.nan, "NaN", math.inf])
def test_a_non_finite_tolerance_or_workload_timeout_is_rejected(value):
    def tol(raw):
        raw["precision"]["fp32"]["rel_l2_tol"] = value
    assert _rejected(tol).startswith("precision.fp32.rel_l2_tol must be a finite number")

    def timeout(raw):
        raw["workload"]["matmul_relu"]["_timeout_s_"] = value
    if not isinstance(value, str):
        assert "workload.matmul_relu._timeout_s_ must be a number > 0" in _rejected(timeout)


def test_steady_delta_nan_on_the_command_line_is_refused(tmp_path):
    """`torchgate compose stats.delta.steady_s=NaN` refuses before it writes; `dvc exp run -S`
    composes the YAML NaN into params.yaml itself, which the stages then refuse."""
    import yaml

    from torchgate.compose import compose

    from .projects import default_params
    out = tmp_path / "params.yaml"
    with pytest.raises(UserError, match=r"^stats.delta.steady_s must be a finite number"):
        compose(out, ["stats.delta.steady_s=NaN"])
    assert not out.exists()
    raw = yaml.safe_load(default_params())
    raw["stats"]["delta"]["steady_s"] = float("nan")
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(UserError, match=r"^stats.delta.steady_s must be a finite number"):
        config.load(out)


def test_records_read_nan_and_a_timing_no_measurement_gives_is_refused():
    """The typed layer reads NaN in records (a numerics error of NaN outputs is measured and
    not finite); a bench timing of NaN is no measurement (core.records.unmeasurable)."""
    data = json.loads(dumps(record_data(record(n=1))))
    data["workloads"]["w"]["processes"][0]["modes"]["eager"]["first_call_s"] = "NaN"
    assert math.isnan(from_data(BenchRecord, {k: v for k, v in data.items() if k not in (
        "schema_version", "kind")}, "").workloads["w"].processes[0].modes["eager"].first_call_s)
    with pytest.raises(UserError, match="test: w eager, process 1: first_call_s nan"):
        parse_record(json.dumps(data), BenchRecord, "test")
    assert from_data(float, 1, "x", finite=True) == 1.0


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["bench"].update(processes=4, max_processes=3),
     "bench.max_processes (3) is below bench.processes (4); raise bench.max_processes to at "
     "least bench.processes"),
    (lambda r: r["bench"].update(warmup_s=2, warmup_max_s=1),
     "bench.warmup_max_s (1) is below bench.warmup_s (2); raise bench.warmup_max_s"),
    (lambda r: r["bench"].update(processes=2, cold_compile_processes=3),
     "bench.cold_compile_processes (3) is more than bench.processes (2): no process would "
     "measure first_call_warm_s; lower it to at most bench.processes"),
    (lambda r: r["matrix"].update(modes=["eager", "compiled", "eager"]),
     "matrix.modes lists eager twice; list each mode once, e.g. ['eager', 'compiled']"),
    (lambda r: r.update(sweep={"batch": [0]}), "sweep.batch must list whole numbers > 0, got [0]"),
    (lambda r: r.update(sweep={"batch": [16, -1]}), "sweep.batch must list whole numbers > 0"),
    (lambda r: r.update(sweep={"batch": [16, 16]}), "sweep.batch lists a value twice: [16, 16]"),
    (lambda r: r.update(sweep={"size": [64, math.nan]}),
     "sweep.size holds nan; each number must be finite"),
])
def test_settings_that_contradict_each_other_are_one_line_saying_what_to_fix(edit, message):
    assert message in _rejected(edit)


def test_the_composed_defaults_pass_every_cross_check():
    cfg = config.parse(_raw())
    assert cfg.bench.max_processes >= cfg.bench.processes >= cfg.bench.cold_compile_processes
