"""Leader election and the lease fence, over real HTTP to loopback servers.

The fence (:meth:`LeaderElector.check`) is what every write of the leader passes: these tests
drive the elector one round at a time (:meth:`LeaderElector.tick`) with a hand-moved fence clock,
so no assertion depends on timing. The hung-request tests use a socket that accepts connections
and never answers.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.kube_api import FakeKubeAPI
from kubernetes.client import ApiClient, Configuration

from scaler.kube.leader import LeaderElector, LeaseLost
from scaler.kube.writer import ANNOTATION_OWNER, ANNOTATION_REPLICA, KubeWriter, NotOwned
from scaler.model.records import TAINT_TO_BE_DELETED
from scaler.sources.kube import make_api_client

LEASE = "/apis/coordination.k8s.io/v1/namespaces/scaler-system/leases"


class FenceClock:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Calls:
    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0

    def on_started(self) -> None:
        self.started += 1

    def on_stopped(self) -> None:
        self.stopped += 1


@pytest.fixture
def kube(tmp_path: Path, no_proxy: None) -> Iterator[tuple[FakeKubeAPI, ApiClient]]:
    with FakeKubeAPI() as server:
        server.load_objects([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}}])
        yield server, make_api_client(str(server.write_kubeconfig(tmp_path / "kubeconfig")))


def elector(api: ApiClient, clock: FenceClock, identity: str = "a_1", **kw: Any) -> LeaderElector:
    return LeaderElector(api, "scaler-system", "scaler", identity, monotonic=clock, **kw)


def patches(server: FakeKubeAPI) -> list[Any]:
    return [r for r in server.requests if r.method == "PATCH"]


def test_the_fence_opens_on_a_renewal_and_closes_for_good_at_the_renew_deadline(
    kube: tuple[FakeKubeAPI, ApiClient],
) -> None:
    server, api = kube
    clock = FenceClock()
    e = elector(api, clock)
    calls = Calls()
    writer = KubeWriter(api, "scaler", replica=e.identity, fence=e.check)
    with pytest.raises(LeaseLost, match="does not hold"):
        e.check()  # a follower may not write
    e.tick(calls.on_started, calls.on_stopped)
    assert calls.started == 1 and e.holds_lease()
    writer.mark_to_be_deleted("n1", 1000.0)
    node = server.get_object("Node", "n1")
    assert node is not None and node["metadata"]["annotations"][ANNOTATION_REPLICA] == "a_1"
    assert node["metadata"]["annotations"][ANNOTATION_OWNER] == "scaler"
    # Paused: the fence clock runs on while no renewal happens.
    clock.now += 9.9
    e.check()
    clock.now += 0.1  # the last renewal began renew_deadline (10 s) ago
    sent = len(patches(server))
    with pytest.raises(LeaseLost, match=r"last renewal began 10\.0s ago"):
        writer.set_state("n1", "drained")
    assert len(patches(server)) == sent, "no write after the lease was lost"
    assert calls.stopped == 1 and e.lost
    # One-way: a later successful round does not give the lease back, not even a rollback.
    e.tick(calls.on_started, calls.on_stopped)
    assert not e.holds_lease() and calls.started == 1 and calls.stopped == 1
    with pytest.raises(LeaseLost):
        writer.clean_to_be_deleted("n1")
    assert len(patches(server)) == sent


def test_another_holder_seen_at_a_renewal_ends_leadership_before_the_deadline(
    kube: tuple[FakeKubeAPI, ApiClient],
) -> None:
    server, api = kube
    clock = FenceClock()
    e = elector(api, clock)
    calls = Calls()
    e.tick(calls.on_started, calls.on_stopped)
    lease = server.get_object("Lease", "scaler", "scaler-system", api_version="coordination.k8s.io/v1")
    assert lease is not None
    lease["spec"]["holderIdentity"] = "b_2"  # another replica took it (this one was paused)
    lease["spec"]["renewTime"] = "2026-01-01T00:00:00.000000Z"
    server.put_object(lease)
    clock.now += 1.0
    e.tick(calls.on_started, calls.on_stopped)
    assert calls.stopped == 1 and e.lost
    with pytest.raises(LeaseLost):
        e.check()


def test_rollback_and_delete_check_touch_only_this_replicas_marks(
    kube: tuple[FakeKubeAPI, ApiClient],
) -> None:
    server, api = kube
    mine = KubeWriter(api, "scaler", replica="a_1")
    other = KubeWriter(api, "scaler", replica="b_2")
    other.mark_to_be_deleted("n1", 1000.0)
    before = server.get_object("Node", "n1")
    assert mine.clean_to_be_deleted("n1") is True  # nothing of ours there: left as it is
    after = server.get_object("Node", "n1")
    assert after is not None and before is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    with pytest.raises(NotOwned, match="marked by replica 'b_2'"):
        mine.verify_marked("n1", "tainted")
    with pytest.raises(NotOwned):
        mine.set_state("n1", "drained")
    # Recovery takes over the marks it saw, then they are its own.
    mine.adopt("n1", "b_2")
    assert mine.verify_marked("n1", "tainted")
    with pytest.raises(NotOwned):
        other.adopt("n1", "b_2")  # the marks changed since b_2 was seen
    assert mine.clean_to_be_deleted("n1") is True
    node = server.get_object("Node", "n1")
    assert node is not None
    assert not [t for t in node["spec"].get("taints") or [] if t["key"] == TAINT_TO_BE_DELETED]
    assert not node["spec"].get("unschedulable")
    assert not [k for k in node["metadata"].get("annotations") or {} if k.startswith("scaler.io/")]


@pytest.fixture
def silent() -> Iterator[ApiClient]:
    """An API client aimed at a socket that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    conf = Configuration(host=f"http://127.0.0.1:{sock.getsockname()[1]}")
    client = ApiClient(conf)
    try:
        yield client
    finally:
        client.close()  # type: ignore[no-untyped-call]
        sock.close()


def test_a_lease_request_that_never_answers_fails_the_attempt(silent: ApiClient) -> None:
    e = LeaderElector(silent, "scaler-system", "scaler", "a_1", lease_duration=2.0, renew_deadline=1.0,
                      retry_period=0.1, attempt_timeout=0.3)  # fmt: skip
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(e.try_acquire_or_renew()), daemon=True)
    t.start()
    t.join(60)  # without a client timeout the request waits forever
    assert not t.is_alive(), "a lease request without a timeout hung"
    assert result == [False]


def test_a_hung_renewal_counts_as_failed_and_the_leader_stops(kube: tuple[FakeKubeAPI, ApiClient]) -> None:
    server, api = kube
    e = LeaderElector(api, "scaler-system", "scaler", "a_1", lease_duration=2.0, renew_deadline=1.0,
                      retry_period=0.1)  # fmt: skip
    calls = Calls()
    e.tick(calls.on_started, calls.on_stopped)
    assert calls.started == 1
    server.delay(LEASE, 3600.0)  # every lease request hangs from now on
    t = threading.Thread(target=e.run, args=(calls.on_started, calls.on_stopped), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the elector hung on a renewal that never answers"
    assert calls.stopped == 1 and e.lost
    with pytest.raises(LeaseLost):
        e.check()


def test_lease_timings_must_nest() -> None:
    api = ApiClient(Configuration(host="http://127.0.0.1:1"))
    with pytest.raises(ValueError, match="renew deadline 15s must be shorter than the lease duration 15s"):
        LeaderElector(api, "ns", "l", "a", lease_duration=15.0, renew_deadline=15.0)
    with pytest.raises(ValueError, match="attempt timeout 10s must be shorter than the renew deadline 10s"):
        LeaderElector(api, "ns", "l", "a", attempt_timeout=10.0)
    assert LeaderElector(api, "ns", "l", "a").attempt_timeout == 5.0
