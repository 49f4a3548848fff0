"""A check split across runners (launcher.shard i/n, a CI job matrix): each job measures its part
of every cell's workloads, planned alike in every job from the same inputs, and
the bench and numerics stages with `launcher.parts` join them into the record one job would
have written."""
from __future__ import annotations

import dataclasses
import shutil

import pytest

from torchgate.arms.plan import Plan
from torchgate.core import config
from torchgate.core.config.settings import Launcher
from torchgate.core.errors import UserError
from torchgate.core.records import load_record, write_record
from torchgate.core.records.parts import joined
from torchgate.core.records.schema import BenchRecord, NumericsRecord
from torchgate.judge.tolerance import numerics_record
from torchgate.launch.cells import measure_bench, measure_numerics
from torchgate.launch.reuse import shard_of

from .projects import REPORTS, git
from .test_pr_cost import RAW, Worker, arms_where_a_changed

THREE = {**RAW, "workload": {**RAW["workload"],
                             "c": {"_target_": "torchgate.workloads.elementwise", "size": 16}},
         "bench": {**RAW["bench"], "unchanged_controls": 1}}


def sharded(cfg, part: str):
    return dataclasses.replace(cfg, launcher=Launcher(shard=part))


def test_a_shard_is_i_of_n_or_one_line():
    assert Launcher(shard="2/3").part == (2, 3) and Launcher().part is None
    for bad in ("0/2", "3/2", "2", "a/b", "1/0"):
        with pytest.raises(UserError, match="launcher.shard is .*; give i/n"):
            Launcher(shard=bad)
    with pytest.raises(UserError, match="launcher.shard and launcher.parts are both set"):
        Launcher(shard="1/2", parts=("shards/1",))


def test_the_parts_cover_every_workload_once_the_costliest_apart(counting):
    """The changed workload (every round, both arms) is a part of its own; the A/A control
    and the workload not measured at all share the other; every job plans the same."""
    cfg = config.parse(THREE)
    arms = arms_where_a_changed(cfg)
    whole = measure_bench(cfg, cfg.cells()[0], Plan(arms, ""), run=Worker(), run_pair=None)
    parts = [shard_of(sharded(cfg, f"{i}/2"), arms, whole) for i in (1, 2)]
    assert parts == [{"a"}, {"b", "c"}]
    three = [shard_of(sharded(cfg, f"{i}/3"), arms, whole) for i in (1, 2, 3)]
    assert sorted(map(sorted, three)) == [["a"], ["b"], ["c"]]
    assert shard_of(cfg, arms, whole) == {"a", "b", "c"}
    # No record to cost them by (a first run): a second a round, the same parts.
    assert [shard_of(sharded(cfg, f"{i}/2"), arms, None) for i in (1, 2)] == parts


def test_joined_parts_are_the_record_one_job_writes(counting):
    cfg = config.parse(THREE)
    arms, cell = arms_where_a_changed(cfg), cfg.cells()[0]
    whole = measure_bench(cfg, cell, Plan(arms, ""), run=Worker(), run_pair=None)
    workers, parts = [Worker(), Worker()], []
    for i, worker in zip((1, 2), workers):
        parts.append(measure_bench(sharded(cfg, f"{i}/2"), cell, Plan(arms, ""), run=worker,
                                   run_pair=None))
    assert {j.workload.name for j in workers[0].jobs} == {"a"}
    assert {j.workload.name for j in workers[1].jobs} == {"b"}     # c: not measured
    assert set(parts[0].workloads) == {"a"} and set(parts[1].workloads) == {"b", "c"}
    one = joined(parts, ["part1", "part2"], set(cfg.workloads))
    assert one.workloads == whole.workloads
    assert one.ab.baseline.workloads == whole.ab.baseline.workloads
    assert dataclasses.replace(one, wall_s=None) == dataclasses.replace(
        whole, wall_s=None, workloads=one.workloads,
        ab=dataclasses.replace(whole.ab, baseline=one.ab.baseline))
    # Numerics too: each part its own workloads, the fresh process on each part's.
    numerics = [numerics_record(cfg, cell, measure_numerics(
        sharded(cfg, f"{i}/2"), cell, Plan(arms, ""),
        run=lambda job, **_: {"status": "OK", "modes": {}})) for i in (1, 2)]
    assert set(joined(numerics, ["p1", "p2"], set(cfg.workloads)).workloads) == {"a", "b", "c"}


def test_a_part_missing_twice_given_or_of_another_check_is_one_line(counting):
    cfg = config.parse(THREE)
    arms, cell = arms_where_a_changed(cfg), cfg.cells()[0]
    first, second = (measure_bench(sharded(cfg, f"{i}/2"), cell, Plan(arms, ""), run=Worker(),
                                   run_pair=None) for i in (1, 2))
    names = ["shards/1", "shards/2"]
    with pytest.raises(UserError, match=r"cell cpu-fp32: no part measured b, c; give every job"):
        joined([first], names[:1], set(cfg.workloads))
    with pytest.raises(UserError, match="workload a is in two parts"):
        joined([first, first], names, set(cfg.workloads))
    other = dataclasses.replace(second, settings={**second.settings, "processes": 9})
    with pytest.raises(UserError, match="shards/2: settings differs from shards/1's"):
        joined([first, other], names, set(cfg.workloads))


def test_the_last_job_joins_the_parts_and_compare_judges_the_whole(project, counting, capsys):
    """Two jobs' reports folders, as CI artifacts hold them, named by launcher.parts: the
    bench and numerics stages join them into one record and page a cell, judged as one run."""
    from torchgate import bench, compare, numerics
    from torchgate.compose import compose
    from torchgate.env import main as env_main
    params = ["matrix=pr", "workload=[matmul_relu,elementwise]"]
    compose(project / "params.yaml", params)
    env_main([])
    git("add", "-A", cwd=project)
    git("commit", "-qm", "project", cwd=project)
    cfg = config.load("params.yaml")
    cell = cfg.cells()[0]
    for i in (1, 2):
        part = sharded(cfg, f"{i}/2")
        folder = project / "shards" / str(i)
        write_record(folder / "bench" / f"{cell.name}.json",
                     measure_bench(part, cell, run=Worker(), run_pair=None))
        write_record(folder / "numerics" / f"{cell.name}.json", numerics_record(
            part, cell, measure_numerics(part, cell, run=lambda job, **_: {
                "status": "OK", "modes": {}})))
    compose(project / "params.yaml", [*params, "launcher.parts=[shards/1,shards/2]"])
    where = ["--device", "cpu", "--precision", "fp32"]
    bench.main(where)
    numerics.main(where)
    said = capsys.readouterr().out
    assert "cpu-fp32: joined from 2 jobs' parts (launcher.parts), not measured here" in said
    record = load_record(REPORTS / "bench" / f"{cell.name}.json", BenchRecord)
    assert set(record.workloads) == set(cfg.workloads)
    assert set(load_record(REPORTS / "numerics" / f"{cell.name}.json",
                           NumericsRecord).workloads) == set(cfg.workloads)
    assert "matmul_relu" in (REPORTS / "bench" / f"{cell.name}.md").read_text()
    compare.main([])
    assert "MISSING" not in (REPORTS / "compare.json").read_text()
    shutil.rmtree(project / "shards" / "2")
    with pytest.raises(SystemExit):         # a job's part lost: one line, nothing written
        bench.main(where)
    assert "torchgate bench: error: launcher.parts: no shards/2/bench/cpu-fp32.json" in \
        capsys.readouterr().err
