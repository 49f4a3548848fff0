"""A fleet run's parts without a cluster: nodes leased so that two units never share one (and
units on different nodes run at once), the cells of a matrix measured at once, and records
handed to the later bench stages of the same `dvc repro` only."""
import dataclasses
import os
import subprocess
import sys
import threading
import time
import types

import pytest

from torchgate.core.errors import UserError
from torchgate.core.records import kept, record_data
from torchgate.launch import fleet
from torchgate.launch.ray_placement import NodeLeases

from .records import record


def node(name, alive=True, **resources):
    return {"NodeID": name, "Alive": alive, "Resources": {"CPU": 2.0, **resources}}


def test_a_unit_waits_for_a_busy_node_and_units_on_two_nodes_run_at_once():
    leases = NodeLeases(lambda: [node("a", host_a=1), node("b", host_b=1)], poll_s=0.05)
    first = leases.take({"CPU": 1, "host_a": 1})
    assert first == "a" and leases.take({"CPU": 1, "host_b": 1}) == "b"   # at once
    got = []
    waiting = threading.Thread(target=lambda: got.append(leases.take({"CPU": 1, "host_a": 1})))
    waiting.start()
    time.sleep(0.2)
    assert not got                 # node a is held: the second unit waits, though it has CPUs
    leases.give_back("a")
    waiting.join(2)
    assert got == ["a"]


def test_a_node_holds_as_many_units_as_it_is_declared_for_and_the_least_held_is_chosen():
    leases = NodeLeases(lambda: [node("a"), node("b")], units_per_node=2, poll_s=0.05)
    taken = [leases.take({"CPU": 1}) for _ in range(4)]
    assert sorted(taken) == ["a", "a", "b", "b"] and taken[:2] == ["a", "b"]


def test_no_node_that_fits_is_none_and_a_lost_or_dead_node_never_fits():
    leases = NodeLeases(lambda: [node("a", host_a=1), node("b", alive=False, host_b=1)])
    assert leases.take({"CPU": 1, "host_c": 1}) is None
    assert leases.take({"CPU": 1, "host_b": 1}) is None
    assert leases.take({"CPU": 1, "host_a": 1}, lost=("a",)) is None
    assert leases.take({"CPU": 4}) is None


def test_the_cells_are_measured_at_once_and_a_cells_error_is_its_result():
    cells = ["x", "y", "z"]
    together = threading.Barrier(len(cells), timeout=5)   # broken unless all three run at once

    class Cell:
        def __init__(self, name):
            self.name = name

    def measure(cell):
        together.wait()
        if cell.name == "z":
            raise ValueError("z failed")
        return cell.name.upper()
    found = fleet.measure_all([Cell(n) for n in cells], measure)
    assert found["x"] == "X" and found["y"] == "Y" and isinstance(found["z"], ValueError)


def test_the_invocation_is_the_dvc_process_and_none_outside_dvc():
    code = "from torchgate.launch.fleet import invocation; print(invocation())"
    # As DVC runs a stage: a shell whose child is the stage; the first other ancestor is
    # this test's process, standing in for dvc.
    shell = subprocess.run(["sh", "-c", f'{sys.executable} -c "{code}"; true'],
                           capture_output=True, text=True, check=True,
                           env={**os.environ, "DVC_STAGE": "bench@cpu-fp32"})
    started = fleet._stat(os.getpid())[2]
    assert shell.stdout.strip() == f"{os.getpid()}-{started}"
    outside = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env={k: v for k, v in os.environ.items()
                                              if k != "DVC_STAGE"})
    assert outside.stdout.strip() == "None"


def test_a_staged_record_is_taken_once_by_its_invocation_and_ended_ones_are_removed(
        project, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(project / "tmp"))
    (project / "tmp").mkdir()
    (project / "params.yaml").write_text("machine: {name: test-box}\n")
    cell = types.SimpleNamespace(name="cpu-fp32")
    here = f"{os.getpid()}-{fleet._stat(os.getpid())[2]}"
    measured = dataclasses.replace(record(n=2), cell="cpu-fp32")
    fleet.Staging(here).leave(cell, measured)
    ended = fleet.Staging("999999999-1")       # an invocation whose process is gone
    ended.leave(cell, measured)
    again = fleet.Staging(here)
    assert not ended.folder.exists()
    taken = again.take(cell)
    assert record_data(taken) == kept(record_data(measured))     # as a report keeps it
    assert again.take(cell) is None
    # A file left there under this cell's name that holds another cell: refused, not taken.
    again.leave(cell, dataclasses.replace(measured, cell="cpu-bf16"))
    with pytest.raises(UserError, match="holds cell 'cpu-bf16', not 'cpu-fp32'"):
        again.take(cell)
