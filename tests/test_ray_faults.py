"""A Ray head that dies mid-run is one line, never a traceback from ray.nodes() nor a ray.get
that waits for ever; a unit with no result past its time limit and the margin for its start
is a TIMEOUT. A stand-in for ray: no cluster needed."""
import threading
import types

import pytest

from torchgate.core.errors import UserError
from torchgate.core.vocabulary import Status
from torchgate.launch import ray_backend
from torchgate.launch.ray_backend import RayBackend, RayCluster, ask_cluster
from torchgate.launch.ray_placement import NodeLeases

ADDRESS = "127.0.0.1:6379"


class RayError(Exception):
    pass


class GetTimeoutError(RayError, TimeoutError):
    pass


class RayTaskError(RayError):
    pass


EXCEPTIONS = types.SimpleNamespace(
    RayError=RayError, GetTimeoutError=GetTimeoutError, RayTaskError=RayTaskError,
    **{name: type(name, (RayError,), {}) for name in (
        "NodeDiedError", "WorkerCrashedError", "LocalRayletDiedError", "ObjectLostError",
        "RaySystemError", "OutOfMemoryError", "TaskUnschedulableError")})


class FakeRay:
    """nodes: a list, or an exception to raise, or "hang"; get: what ray.get does."""
    exceptions = EXCEPTIONS

    def __init__(self, nodes, get):
        self._nodes, self._get, self.cancelled, self.gets = nodes, get, [], []

    def nodes(self):
        if self._nodes == "hang":
            threading.Event().wait()
        if isinstance(self._nodes, BaseException):
            raise self._nodes
        return self._nodes

    def get(self, ref, timeout=None):
        self.gets.append(timeout)
        return self._get(ref, timeout)

    def cancel(self, ref, force=False):
        self.cancelled.append((ref, force))


class FakeTask:
    def options(self, **kwargs):
        return self

    def remote(self, *args):
        return "ref"


NODE = {"NodeID": "n0", "Alive": True, "Resources": {"CPU": 1}}


def backend(ray) -> RayBackend:
    """What RayCluster's and RayBackend's __init__ set, without joining a cluster."""
    cluster = RayCluster.__new__(RayCluster)
    cluster.address, cluster.wait_s, cluster.ray, cluster.task = ADDRESS, 0.5, ray, FakeTask()
    cluster.leases = NodeLeases(lambda: cluster.ask(ray.nodes), poll_s=0.01)
    cluster.codes, cluster.running, cluster.closing = {}, set(), threading.Event()
    cluster.pinned = lambda node: {}
    made = RayBackend.__new__(RayBackend)
    made.cluster, made.address, made.ray = cluster, ADDRESS, ray
    made.asked, made.wanted, made.cache_dir, made.max_gb = {"num_cpus": 1}, {"CPU": 1}, None, None
    made.venvs, made.codes = {}, {}
    return made


@pytest.fixture(autouse=True)
def plain_jobs(monkeypatch):
    """A unit's job goes to the task as plain data; these tests pass a stand-in job."""
    monkeypatch.setattr(ray_backend, "to_data", lambda job: job)


def job() -> str:
    return "a job"


def never(ref, timeout):
    raise GetTimeoutError("not ready")


def test_a_head_that_died_is_one_line_where_ray_placement_would_raise():
    dead = FakeRay(ConnectionError("failed to connect to GCS at 127.0.0.1:6379\nretrying"), never)
    with pytest.raises(UserError) as err:
        backend(dead).run(job(), timeout_s=5)
    assert str(err.value) == (
        f"the Ray cluster at {ADDRESS} stopped answering (ConnectionError: failed to connect "
        "to GCS at 127.0.0.1:6379): its head may have died; restart it (`ray start --head`) "
        "and run the stage again, or set launcher.backend=local")


def test_a_head_that_stops_answering_is_one_line_too():
    with pytest.raises(UserError, match=r"stopped answering \(no answer within 0.2 s\)"):
        ask_cluster(FakeRay("hang", never).nodes, ADDRESS, 0.2)


def test_a_head_that_dies_while_a_unit_runs_is_one_line(monkeypatch):
    monkeypatch.setattr(ray_backend, "POLL_S", 0.01)
    ray = FakeRay([NODE], never)

    def get(ref, timeout):          # the first slice passes; then the head is gone
        ray._nodes = ConnectionError("GCS unreachable")
        raise GetTimeoutError("not ready")
    ray._get = get
    with pytest.raises(UserError, match="stopped answering .ConnectionError: GCS unreachable."):
        backend(ray).run(job(), timeout_s=5)
    assert ray.gets and all(t is not None and t <= 0.01 for t in ray.gets)   # never unbounded


def test_a_non_ray_failure_while_waiting_is_one_line():
    def broken(ref, timeout):
        raise OSError("socket closed")
    with pytest.raises(UserError, match=f"the Ray cluster at {ADDRESS} failed while a unit "
                                        "ran: OSError: socket closed"):
        backend(FakeRay([NODE], broken)).run(job(), timeout_s=5)


def test_no_result_past_the_time_limit_and_the_start_margin_is_a_timeout(monkeypatch):
    monkeypatch.setattr(ray_backend, "POLL_S", 0.01)
    monkeypatch.setattr(ray_backend, "START_MARGIN_S", 0.05)
    ray = FakeRay([NODE], never)
    result = backend(ray).run(job(), timeout_s=0.02)
    assert result["status"] == Status.TIMEOUT
    assert result["error"] == ("no result from the Ray cluster within 0.07 s (the unit's time "
                               "limit, 0.02 s per process, and 0.05 s to start it on its node)")
    assert ray.cancelled == [("ref", True)]


def test_a_result_in_time_is_returned():
    ray = FakeRay([NODE], lambda ref, timeout: [{"status": "OK", "host": {}}])
    assert backend(ray).run(job(), timeout_s=5) == {"status": "OK", "host": {}}
    assert ray.gets == [ray_backend.WAKE_S]
