import os

import pytest

from .projects import MACHINE, enter_project, make_project


@pytest.fixture(autouse=True)
def machine_name(monkeypatch):
    """Every test runs as machine MACHINE, whatever hardware runs the suite; a test of the
    derived name removes the variable."""
    monkeypatch.setenv("TORCHGATE_MACHINE", MACHINE)


@pytest.hookimpl(optionalhook=True)      # a hook of pytest-xdist, if installed
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: a test process per core and one more, at most 4: the tests wait about an
    eighth of their time (worker processes starting, time limits running out), which the
    extra process fills (on 2 cores the suite took 682 s with 3 processes, 795 s with 2);
    beyond 4, an end-to-end test's workers keep a core or two busy themselves, and each test
    process holds torch (about 1 GiB) in memory."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1                                   # macOS has no affinity
    return max(1, min(cores + 1, 4))


def pytest_collection_modifyitems(config, items):
    """The slow tests first, so that the longest (a `dvc repro` end to end, minutes) start
    while the short ones can still fill the other test processes, not last, alone (the
    `worksteal` scheduler hands a process that ran out half of another's queue). Tests
    marked `gpu` run where torch sees a CUDA device, and are skipped, with the reason,
    elsewhere (torch is imported only when such a test was collected)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    try:
        import torch
        present = torch.cuda.is_available()
    except Exception:
        present = False
    if not present:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A fresh git repository holding torchgate's pipeline files, as a user's fork would."""
    return enter_project(make_project(tmp_path, tmp_path), monkeypatch)


@pytest.fixture
def counting(monkeypatch):
    """valgrind as if installed, and an environment record as if the env stage had run."""
    from torchgate.launch import cells, reuse
    monkeypatch.setattr(cells.callgrind, "missing", lambda: None)
    monkeypatch.setattr(reuse.callgrind, "version", lambda: "3.19.0")
    monkeypatch.setattr(reuse, "_read_bytes", lambda path: b'{"env": "this machine"}')


@pytest.fixture
def github(monkeypatch):
    """A local stand-in of GitHub's API, and the environment that points the poster at it."""
    from tests.github_standin import GitHubStandIn

    with GitHubStandIn() as hub:
        monkeypatch.setenv("GITHUB_API_URL", hub.url)
        monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
        yield hub
