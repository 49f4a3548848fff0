"""Every schema version ever written still loads and compares, and a record type cannot change
in a way a reader would misread without a new schema version; a field added with a default
needs none.

tests/fixtures/schema/ holds a real record of each (kind, version), written by the code of the
commit its README names (two bench ones with the in-process control on), and shapes.json, the
shape of each record type per schema version (tests/schema_shapes.py)."""
import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.schema_shapes import SHAPES, changes, classes, current, module, shape
from torchgate.core.config import parse
from torchgate.core.errors import UserError
from torchgate.core.records.inputs import RecordPair, RunInputs
from torchgate.judge.run import compare_run

FIXTURES = Path(__file__).parent / "fixtures" / "schema"
NAME = re.compile(r"(?P<kind>[a-z]+)-v(?P<version>\d+)(-(?P<label>[a-z0-9]+))?\.json")
FILES = sorted(p.name for p in FIXTURES.glob("*.json") if NAME.fullmatch(p.name))
KINDS = ("bench", "numerics", "compare", "env", "migration")
CELL = "cpu-fp32"          # every fixture measured this one cell
WRITE = "python -m tests.schema_shapes --write"


def _load(name: str):
    kind = NAME.fullmatch(name)["kind"]
    return module("records").load_record(FIXTURES / name, module("schema").KINDS[kind])


@pytest.mark.parametrize("name", FILES)
def test_a_fixture_loads_as_its_kind_and_survives_a_round_trip(name):
    records, match = module("records"), NAME.fullmatch(name)
    data = json.loads((FIXTURES / name).read_text())
    assert (data["kind"], data["schema_version"]) == (match["kind"], int(match["version"]))
    record = _load(name)
    cls = module("schema").KINDS[match["kind"]]
    assert type(record) is cls
    text = records.dumps(records.record_data(record))
    assert records.dumps(records.record_data(records.parse_record(text, cls, name))) == text


@pytest.mark.parametrize("kind", KINDS)
def test_every_schema_version_of_a_kind_has_a_fixture(kind):
    latest = module("records").SCHEMA[kind]
    missing = [f"{kind}-v{v}.json" for v in range(1, latest + 1) if f"{kind}-v{v}.json" not in FILES]
    assert not missing, f"add a record written by that version to {FIXTURES}: {missing}"


def _compared(name: str):
    """The fixture as the baseline of a record of the current version (the current fixture of
    its kind), as the compare stage judges them."""
    kind = NAME.fullmatch(name)["kind"]
    cfg = parse(yaml.safe_load((FIXTURES / "params.yaml").read_text()))
    now = _load(f"{kind}-v{module('records').SCHEMA[kind]}.json")
    env = _load(f"env-v{module('records').SCHEMA['env']}.json")
    return compare_run(cfg, RunInputs("HEAD", "0" * 40, {(kind, CELL): RecordPair(now, _load(name))},
                                      env, env))


@pytest.mark.parametrize("name", [n for n in FILES if n.startswith(("bench-", "numerics-"))])
def test_a_baseline_of_every_version_compares_with_a_current_record(name):
    rows = _compared(name).rows
    metrics = {r.metric for r in rows}
    assert rows and {(r.stage, r.workload) for r in rows} == {(name.split("-")[0], "matmul_relu")}
    assert not [r for r in rows if r.verdict in ("MISSING", "FAILED")]
    assert metrics >= ({"steady_s", "first_call_s", "peak_bytes"} if name.startswith("bench-")
                       else {"numerics", "determinism", "drift", "ops"})


@pytest.mark.parametrize("name", ["bench-v5-control.json", "bench-v6-control.json"])
def test_a_record_written_with_the_in_process_control_reads_without_it(name):
    data = json.loads((FIXTURES / name).read_text())
    assert data["settings"]["control"] is True
    assert all("control_s" in m for run in data["workloads"].values()
               for p in run["processes"] for m in p["modes"].values())
    record = _load(name)
    text = module("records").dumps(module("records").record_data(record))
    assert "control" not in text
    steady = [m.steady_s for run in record.workloads.values() for p in run.processes
              for m in p.modes.values()]
    assert steady and all(len(s) == data["settings"]["samples"] for s in steady)


# ---- the shape guard -------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_a_record_type_keeps_the_shape_of_its_schema_version_or_adds_fields_with_defaults(kind):
    version, now = current()[kind]
    recorded = json.loads(SHAPES.read_text()).get(kind, {}).get(str(version))
    assert recorded is not None, (
        f"no shape recorded for {kind} schema {version}: with its history, upgrade and a "
        f"fixture {kind}-v{version}.json in place, run `{WRITE}`")
    misread = changes(recorded, now)
    assert not misread, (
        f"the {kind} record type changed in a way a reader would misread ({'; '.join(misread)}) "
        f"but its schema version is still {version}: add version {version + 1} to "
        f"{module('upgrades').__name__}.HISTORY, its upgrade where older data must change and "
        f"a fixture {kind}-v{version + 1}.json (tests/fixtures/schema/README.md), then run "
        f"`{WRITE}`; a field added with a default needs none of this")


@pytest.mark.parametrize("kind", KINDS)
def test_each_version_says_what_changed_and_upgrades_go_from_one_to_the_next(kind):
    history, upgrades = module("upgrades").HISTORY, module("upgrades").UPGRADES
    versions = sorted(v for k, v in history if k == kind)
    assert versions == list(range(1, module("records").SCHEMA[kind] + 1))
    assert all(history[(kind, v)].strip() for v in versions)
    assert {v for k, v in upgrades if k == kind} <= set(versions[:-1])
    assert {v for k, v in module("upgrades").SAME_VERSION if k == kind} <= set(versions)


def _shapes(*inner_fields) -> dict:
    """The shape of an outer record holding an Inner of these fields."""
    inner = dataclasses.make_dataclass("Inner", inner_fields)
    return shape(dataclasses.make_dataclass(
        "Outer", [("one", inner | None, dataclasses.field(default=None))]))


A = ("a", int)
B = ("b", float | None, dataclasses.field(default=None))


@pytest.mark.parametrize("fields, misread", [
    ((A, B), []),
    ((A, B, ("c", str | None, dataclasses.field(default=None))), []),
    ((A, B, ("c", tuple[int, ...], dataclasses.field(default=()))), []),
    ((A, B, ("c", dataclasses.make_dataclass("Deep", [("d", int)]) | None,
             dataclasses.field(default=None))), []),
    ((("c", int), A, B), ["Inner.c is new without a default: a record without it is refused"]),
    ((A,), ["Inner.b is gone (removed or renamed)"]),
    ((("z", int), B), ["Inner.a is gone (removed or renamed)",
                       "Inner.z is new without a default: a record without it is refused"]),
    ((A, ("z", float | None, dataclasses.field(default=None))),
     ["Inner.b is gone (removed or renamed)"]),
    ((("a", float), B), ["Inner.a is float, was int"]),
    ((A, ("b", float | None, dataclasses.field(default=0.0))),
     ["Inner.b defaults to 0.0, was None"]),
    ((A, ("b", float | None)), ["Inner.b defaults to nothing (required), was None"]),
])
def test_the_shape_guard_passes_a_field_added_with_a_default_and_nothing_a_reader_misreads(
        fields, misread):
    assert changes(_shapes(A, B), _shapes(*fields)) == misread


def test_an_older_torchgate_refuses_a_newer_field_by_name_rather_than_misread_it():
    records = module("records")
    name = f"bench-v{records.SCHEMA['bench']}.json"
    data = json.loads((FIXTURES / name).read_text())
    mode = data["workloads"]["matmul_relu"]["processes"][0]["modes"]["eager"]
    mode["a_newer_field"] = 1.0
    with pytest.raises(UserError) as err:
        records.parse_record(json.dumps(data), module("schema").KINDS["bench"], name)
    assert str(err.value).startswith(
        f"{name}: unknown key workloads.matmul_relu.processes[0].modes.eager.a_newer_field; ")
    assert "a newer torchgate may have written it" in str(err.value)


def test_the_fingerprint_sees_a_field_added_deep_in_a_record():
    inner = dataclasses.make_dataclass("Inner", [("a", int)])
    wider = dataclasses.make_dataclass("Inner", [("a", int), ("b", float | None)])
    outer, outer_wider = (dataclasses.make_dataclass("Outer", [("runs", dict[str, tuple[c, ...]]),
                                                              ("one", c | None)])
                          for c in (inner, wider))
    assert classes(outer) == {"Inner": {"a": "int"},
                              "Outer": {"runs": "dict[str, tuple[Inner, ...]]",
                                        "one": "Inner | None"}}
    assert shape(outer)["fingerprint"] != shape(outer_wider)["fingerprint"]
