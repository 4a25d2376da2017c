"""KubeWriter, the write side of the controller, against the loopback API server (real HTTP through
the ``kubernetes`` client, faults injected by the server, never by patching the client): the mark,
state and rollback round trip, optimistic concurrency, ownership, the fence, evictions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from builders import OBJECT_NAMESPACE, Sleeps, make_pod, node_object, pod_object
from fakes.kube_api import FakeKubeAPI

from scaler.kube.leader import LeaseLost
from scaler.kube.writer import (
    ANNOTATION_OWNER,
    ANNOTATION_REPLICA,
    ANNOTATION_STATE,
    ANNOTATION_WAS_UNSCHEDULABLE,
    STATE_DRAINED,
    STATE_TAINTED,
    KubeWriter,
    NotOwned,
    WriteError,
)
from scaler.model.records import TAINT_TO_BE_DELETED

NOW = 1_780_000_000.0


@pytest.fixture
def fake(no_proxy: None) -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        server.grace_scale = 0.0  # an evicted pod is deleted at once
        server.load_objects([node_object("n1"), node_object("n2", unschedulable=True), pod_object("web-1")])
        yield server


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def writer(api: Any, sleeps: Sleeps, **kw: Any) -> KubeWriter:
    kw.setdefault("replica", "a_1")
    return KubeWriter(api, "scaler", clock=lambda: NOW, sleep=sleeps, **kw)


def node(fake: FakeKubeAPI, name: str) -> dict[str, Any]:
    obj = fake.get_object("Node", name)
    assert obj is not None
    return obj


def patches(fake: FakeKubeAPI, name: str) -> int:
    return len(fake.requests_to(f"/api/v1/nodes/{name}", "PATCH"))


def test_mark_state_verify_and_clean_round_trip(fake: FakeKubeAPI, api: Any, sleeps: Sleeps) -> None:
    w = writer(api, sleeps)
    w.mark_to_be_deleted("n1", NOW)
    marked = node(fake, "n1")
    assert [(t["key"], t["value"], t["effect"]) for t in marked["spec"]["taints"]] == [
        (TAINT_TO_BE_DELETED, str(int(NOW)), "NoSchedule")
    ]
    assert marked["spec"]["unschedulable"] is True
    notes = marked["metadata"]["annotations"]
    assert (notes[ANNOTATION_OWNER], notes[ANNOTATION_REPLICA], notes[ANNOTATION_STATE]) == (
        "scaler",
        "a_1",
        STATE_TAINTED,
    )
    w.set_state("n1", STATE_DRAINED)
    assert w.verify_marked("n1", STATE_DRAINED) == node(fake, "n1")["metadata"]["resourceVersion"]
    with pytest.raises(NotOwned, match="state 'drained', not 'tainted'"):
        w.verify_marked("n1", STATE_TAINTED)
    assert w.clean_to_be_deleted("n1") is True
    clean = node(fake, "n1")
    assert not clean["spec"].get("taints") and not clean["spec"].get("unschedulable")
    assert not set(clean["metadata"].get("annotations") or {}) & {ANNOTATION_OWNER, ANNOTATION_REPLICA, ANNOTATION_STATE}


def test_a_node_cordoned_before_stays_cordoned_after_the_rollback(
    fake: FakeKubeAPI, api: Any, sleeps: Sleeps
) -> None:
    w = writer(api, sleeps)
    w.mark_to_be_deleted("n2", NOW)
    assert node(fake, "n2")["metadata"]["annotations"][ANNOTATION_WAS_UNSCHEDULABLE] == "true"
    assert w.clean_to_be_deleted("n2") is True
    after = node(fake, "n2")
    assert after["spec"]["unschedulable"] is True and not after["spec"].get("taints")
    assert ANNOTATION_WAS_UNSCHEDULABLE not in (after["metadata"].get("annotations") or {})


def test_a_conflict_is_read_again_and_retried_after_the_conflict_wait(
    fake: FakeKubeAPI, api: Any, sleeps: Sleeps
) -> None:
    fake.fail("/api/v1/nodes/n1", 409, times=1, method="PATCH", exact=True)
    writer(api, sleeps).mark_to_be_deleted("n1", NOW)
    assert patches(fake, "n1") == 2 and sleeps.waits == [0.75]
    assert node(fake, "n1")["spec"]["unschedulable"] is True


def test_marks_of_another_replica_are_neither_changed_nor_removed(
    fake: FakeKubeAPI, api: Any, sleeps: Sleeps
) -> None:
    writer(api, sleeps, replica="b_2").mark_to_be_deleted("n1", NOW)
    before = patches(fake, "n1")
    w = writer(api, sleeps)
    with pytest.raises(NotOwned, match="marked by replica 'b_2', not 'a_1'"):
        w.set_state("n1", STATE_DRAINED)
    assert w.clean_to_be_deleted("n1") is True  # the node exists: nothing of ours to undo
    assert patches(fake, "n1") == before
    w.adopt("n1", "b_2")  # a previous leader's node, taken over explicitly
    assert node(fake, "n1")["metadata"]["annotations"][ANNOTATION_REPLICA] == "a_1"
    with pytest.raises(NotOwned, match="adopt node gone: node not found"):
        w.adopt("gone", "b_2")


def test_the_fence_stops_a_write_before_it_is_sent(fake: FakeKubeAPI, api: Any, sleeps: Sleeps) -> None:
    def fence() -> None:
        raise LeaseLost("lease held by b_2")

    w = writer(api, sleeps, fence=fence)
    with pytest.raises(LeaseLost):
        w.mark_to_be_deleted("n1", NOW)
    with pytest.raises(LeaseLost):
        w.evict_once(make_pod("web-1", namespace=OBJECT_NAMESPACE, uid="uid-web-1"), 30)
    assert patches(fake, "n1") == 0
    assert fake.requests_to(f"/api/v1/namespaces/{OBJECT_NAMESPACE}/pods/web-1/eviction", "POST") == []


def test_an_eviction_refused_with_429_is_retried_until_it_passes(
    fake: FakeKubeAPI, api: Any, sleeps: Sleeps
) -> None:
    path = f"/api/v1/namespaces/{OBJECT_NAMESPACE}/pods/web-1/eviction"
    fake.fail(path, 429, times=2, method="POST")
    w = writer(api, sleeps, eviction_retry_seconds=1.0)
    pod = make_pod("web-1", namespace=OBJECT_NAMESPACE, uid="uid-web-1")
    assert [p["metadata"]["name"] for p in w.pods_on_node("n1")] == ["web-1"]
    result = w.evictor(max_pod_eviction_time=60, max_graceful_termination_sec=600)(pod)
    assert result.ok, result.error
    assert len(fake.requests_to(path, "POST")) == 3 and sleeps.waits == [1.0, 1.0]
    assert w.pod_gone(pod) and w.pods_on_node("n1") == []
    events = fake.objects("Event")
    assert [(e["reason"], e["involvedObject"]["name"]) for e in events] == [("ScaleDown", "web-1")]


def test_a_failed_eviction_is_reported_with_its_status_and_a_warning(
    fake: FakeKubeAPI, api: Any, sleeps: Sleeps
) -> None:
    path = f"/api/v1/namespaces/{OBJECT_NAMESPACE}/pods/web-1/eviction"
    fake.fail(path, 403, method="POST")  # not retryable: one attempt
    pod = make_pod("web-1", namespace=OBJECT_NAMESPACE, uid="uid-web-1")
    result = writer(api, sleeps).evictor(max_pod_eviction_time=60, max_graceful_termination_sec=600)(pod)
    assert not result.ok and (result.error or "").startswith(f"evict {OBJECT_NAMESPACE}/web-1 after 1 attempt(s): HTTP 403")
    assert [(e["type"], e["reason"]) for e in fake.objects("Event")] == [("Warning", "ScaleDownFailed")]
    assert not writer(api, sleeps).pod_gone(pod)


def test_a_missing_node_reads_as_none_and_cannot_be_marked(fake: FakeKubeAPI, api: Any, sleeps: Sleeps) -> None:
    w = writer(api, sleeps)
    assert w.get_node("n1") is not None and w.get_node("nope") is None
    with pytest.raises(WriteError, match="mark node nope: node not found"):
        w.mark_to_be_deleted("nope", NOW)


def test_a_stale_view_holds_taints_and_evictions_not_rollbacks(
    fake: FakeKubeAPI, api: Any, sleeps: Sleeps
) -> None:
    """While ``hold`` says the cluster view may be stale, no taint and no eviction is sent (an
    eviction answers "not sent" and its retries wait for a fresh view); a rollback is."""
    stale = ["Pod relisting after watch ERROR 410: 1s"]
    w = writer(api, sleeps, hold=lambda: stale[0], eviction_retry_seconds=0.01)
    with pytest.raises(
        WriteError, match=r"taint node n1: not sent, the cluster view may be stale \(Pod relisting"
    ):
        w.mark_to_be_deleted("n1", NOW)
    with pytest.raises(WriteError, match="not sent"):
        w.mark_hot("n1", NOW)
    assert patches(fake, "n1") == 0
    pod = make_pod("web-1", namespace=OBJECT_NAMESPACE, uid="uid-web-1")
    ok, status, message = w.evict_once(pod, 30)
    assert (ok, status) == (False, None) and message.startswith("not sent: the cluster view may be stale")
    path = f"/api/v1/namespaces/{OBJECT_NAMESPACE}/pods/web-1/eviction"
    assert fake.requests_to(path, "POST") == []
    stale[0] = ""
    w.mark_to_be_deleted("n1", NOW)
    stale[0] = "Node relisting"
    assert w.clean_to_be_deleted("n1")  # the rollback goes out
    assert patches(fake, "n1") == 2
    held = iter(["Pod relisting", "Pod relisting", ""])
    w.hold = lambda: next(held, "")
    assert w.evictor(max_pod_eviction_time=5.0, max_graceful_termination_sec=30)(pod).ok
    assert len(fake.requests_to(path, "POST")) == 1
