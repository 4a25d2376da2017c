"""The loopback fake API server's write, watch and fault-injection routes, driven by the real
``kubernetes`` client over HTTP (the reads are covered by test_kube_source.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from builders import node_object as node
from builders import pdb_object as pdb
from builders import pod_object as pod
from fakes.kube_api import FakeKubeAPI
from kubernetes import client as k8s
from kubernetes import watch as _k8s_watch
from kubernetes.client.exceptions import ApiException
from waiting import wait_for

k8s_watch: Any = _k8s_watch  # untyped module

NS = "shop"


def eviction(name: str, grace: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": NS},
    }
    if grace is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace}
    return body



@pytest.fixture
def fake(no_proxy: None) -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI(stamp_loaded=True, bookmark_interval=0.1) as server:
        server.load_objects([node("n1"), node("n2"), pod("web-1"), pod("web-2"), pdb("web", 1)])
        yield server


@pytest.fixture
def v1(api: Any) -> Any:
    return k8s.CoreV1Api(api)


def raw(resp: Any) -> Any:
    """The JSON body of a ``_preload_content=False`` response."""
    try:
        return json.loads(resp.data)
    finally:
        resp.release_conn()


def done(resp: Any) -> int:
    """Read a ``_preload_content=False`` response and release its connection; returns the
    status. (Releasing an unread response would leave its body on the pooled connection: the
    next request on it fails with ``BadStatusLine``.)"""
    try:
        resp.data  # noqa: B018
        return int(resp.status)
    finally:
        resp.release_conn()


def evict(v1: Any, name: str, grace: int | None = None) -> int:
    """POST an eviction of pod ``name``; returns the HTTP status (201)."""
    return done(v1.create_namespaced_pod_eviction(name, NS, eviction(name, grace), _preload_content=False))


def api_error(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as err:
        call()
    return int(err.value.status), json.loads(err.value.body or "")


# -- nodes -----------------------------------------------------------------------------------------


def test_patch_node_taints_with_each_patch_type(fake: FakeKubeAPI, v1: Any) -> None:
    taint = {"key": "scaler/drain", "value": "true", "effect": "NoSchedule"}
    rv0 = fake.resource_version

    # A dict body goes out as a strategic merge patch: the taint list is replaced wholesale.
    fake.put_object(node("n1", taints=[{"key": "old", "effect": "NoExecute"}]))
    got = raw(v1.patch_node("n1", {"spec": {"taints": [taint]}}, _preload_content=False))
    assert fake.requests[-1].content_type == "application/strategic-merge-patch+json"
    assert got["kind"] == "Node" and got["spec"]["taints"] == [taint]
    assert got["spec"]["providerID"] and int(got["metadata"]["resourceVersion"]) > rv0

    # Merge patch, forced with _content_type; null deletes.
    got = raw(
        v1.patch_node(
            "n1",
            {"metadata": {"labels": {"pool": None, "drain": "yes"}}, "spec": {"unschedulable": True}},
            _content_type="application/merge-patch+json",
            _preload_content=False,
        )
    )
    assert fake.requests[-1].content_type == "application/merge-patch+json"
    assert got["metadata"]["labels"] == {"drain": "yes"} and got["spec"]["unschedulable"] is True

    # A list body goes out as a JSON patch (RFC 6902), test op included.
    rv = got["metadata"]["resourceVersion"]
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/spec/taints/-", "value": {"key": "b", "effect": "PreferNoSchedule"}},
        {"op": "replace", "path": "/spec/unschedulable", "value": False},
        {"op": "remove", "path": "/metadata/labels/drain"},
    ]
    got = raw(v1.patch_node("n1", ops, _preload_content=False))
    assert fake.requests[-1].content_type == "application/json-patch+json"
    assert [t["key"] for t in got["spec"]["taints"]] == ["scaler/drain", "b"]
    assert got["spec"]["unschedulable"] is False and got["metadata"]["labels"] == {}
    assert fake.get_object("Node", "n1") == got

    # A failed test op is 422 and changes nothing.
    status, body = api_error(
        lambda: v1.patch_node("n1", [{"op": "test", "path": "/spec/unschedulable", "value": True}])
    )
    assert (status, body["reason"]) == (422, "Invalid")
    assert fake.get_object("Node", "n1") == got
    # The client returns a model object when content is preloaded.
    assert v1.patch_node("n1", {"metadata": {"labels": {"x": "y"}}}).metadata.labels == {"x": "y"}


def test_optimistic_concurrency_on_node_writes(fake: FakeKubeAPI, v1: Any) -> None:
    current = raw(v1.read_node("n1", _preload_content=False))
    stale = current["metadata"]["resourceVersion"]
    fake.put_object(node("n1", unschedulable=True))  # someone else writes in between

    # A merge patch carrying the stale resourceVersion: 409, nothing written.
    patch = {
        "metadata": {"resourceVersion": stale},
        "spec": {"taints": [{"key": "t", "effect": "NoSchedule"}]},
    }
    status, body = api_error(lambda: v1.patch_node("n1", patch, _content_type="application/merge-patch+json"))
    assert (status, body["reason"], body["details"]["name"]) == (409, "Conflict", "n1")
    assert "the object has been modified" in body["message"]
    assert "taints" not in fake.get_object("Node", "n1")["spec"]  # type: ignore[index]

    # PUT with the stale version: 409; with the current one: 200 and a new version.
    status, _ = api_error(lambda: v1.replace_node("n1", current))
    assert status == 409
    latest = raw(v1.read_node("n1", _preload_content=False))
    latest["spec"]["unschedulable"] = False
    replaced = raw(v1.replace_node("n1", latest, _preload_content=False))
    assert replaced["spec"]["unschedulable"] is False
    assert int(replaced["metadata"]["resourceVersion"]) > int(latest["metadata"]["resourceVersion"])
    # The same patch with the current version goes through.
    patch["metadata"]["resourceVersion"] = replaced["metadata"]["resourceVersion"]
    got = raw(
        v1.patch_node("n1", patch, _content_type="application/merge-patch+json", _preload_content=False)
    )
    assert got["spec"]["taints"] == [{"key": "t", "effect": "NoSchedule"}]


def test_delete_node_deletes_only_the_node(fake: FakeKubeAPI, v1: Any) -> None:
    got = raw(v1.delete_node("n1", _preload_content=False))
    assert (got["kind"], got["status"], got["details"]["name"]) == ("Status", "Success", "n1")
    assert [n["metadata"]["name"] for n in fake.objects("Node")] == ["n2"]
    assert len(fake.objects("Pod")) == 2  # its pods stay (the node controller would GC them)
    status, body = api_error(lambda: v1.delete_node("n1"))
    assert status == 404 and body["reason"] == "NotFound"
    status, _ = api_error(lambda: v1.read_node("n1"))
    assert status == 404
    # dryRun deletes nothing.
    v1.delete_node("n2", dry_run="All")
    assert fake.get_object("Node", "n2") is not None


# -- evictions -------------------------------------------------------------------------------------


def test_eviction_honours_pdbs(fake: FakeKubeAPI, v1: Any) -> None:
    fake.grace_scale = 0.02  # 30 s of grace -> 0.6 s
    resp = v1.create_namespaced_pod_eviction("web-1", NS, eviction("web-1"), _preload_content=False)
    assert resp.status == 201
    assert raw(resp) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    budget = fake.get_object("PodDisruptionBudget", "web", NS)
    assert budget is not None and budget["status"]["disruptionsAllowed"] == 0
    assert "web-1" in budget["status"]["disruptedPods"]
    terminating = fake.get_object("Pod", "web-1", NS)
    assert terminating is not None and terminating["metadata"]["deletionTimestamp"]
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30

    # The budget is spent: the next eviction is 429 TooManyRequests and changes nothing.
    status, body = api_error(lambda: v1.create_namespaced_pod_eviction("web-2", NS, eviction("web-2")))
    assert (status, body["reason"]) == (429, "TooManyRequests")
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "deletionTimestamp" not in fake.get_object("Pod", "web-2", NS)["metadata"]  # type: ignore[index]

    # The evicted pod goes away after its (scaled) grace period; the budget is not given back.
    assert fake.get_object("Pod", "web-1", NS) is not None
    wait_for(lambda: fake.get_object("Pod", "web-1", NS) is None)
    assert fake.get_object("PodDisruptionBudget", "web", NS)["status"]["disruptionsAllowed"] == 0  # type: ignore[index]

    # Unknown pod: 404.
    status, body = api_error(lambda: v1.create_namespaced_pod_eviction("nope", NS, eviction("nope")))
    assert (status, body["reason"]) == (404, "NotFound")


def test_eviction_grace_and_replacement(fake: FakeKubeAPI, v1: Any) -> None:
    fake.replace_evicted_pods = True
    # deleteOptions.gracePeriodSeconds=0: gone before the call returns; budget restored for a
    # ReplicaSet pod.
    assert evict(v1, "web-1", grace=0) == 201
    assert fake.get_object("Pod", "web-1", NS) is None
    assert fake.get_object("PodDisruptionBudget", "web", NS)["status"]["disruptionsAllowed"] == 1  # type: ignore[index]
    # grace_scale=0 makes every grace period instant; a bare pod gives no budget back.
    fake.grace_scale = 0.0
    fake.put_object(pod("solo", owner=None))
    assert evict(v1, "solo") == 201
    assert fake.get_object("Pod", "solo", NS) is None
    assert fake.get_object("PodDisruptionBudget", "web", NS)["status"]["disruptionsAllowed"] == 0  # type: ignore[index]
    # dryRun checks the budget and changes nothing.
    status, _ = api_error(
        lambda: v1.create_namespaced_pod_eviction("web-2", NS, eviction("web-2"), dry_run="All")
    )
    assert status == 429
    fake.put_object(pdb("web", 3))
    v1.create_namespaced_pod_eviction("web-2", NS, eviction("web-2"), dry_run="All")
    assert fake.get_object("Pod", "web-2", NS) is not None
    assert fake.get_object("PodDisruptionBudget", "web", NS)["status"]["disruptionsAllowed"] == 3  # type: ignore[index]


def test_eviction_pdb_selection(fake: FakeKubeAPI, v1: Any) -> None:
    fake.grace_scale = 0.0
    fake.put_object(pdb("web", 0))
    fake.put_object(pod("db-0", app="db", owner="StatefulSet"))
    fake.put_object(
        pdb("other", 0, {"matchExpressions": [{"key": "app", "operator": "In", "values": ["cache"]}]})
    )
    fake.put_object(
        pdb("db", 1, {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]})
    )
    # Only matching PDBs count: "web" (0 allowed) does not select db-0, "db" does.
    assert evict(v1, "db-0") == 201
    assert fake.get_object("Pod", "db-0", NS) is None
    assert fake.get_object("PodDisruptionBudget", "db", NS)["status"]["disruptionsAllowed"] == 0  # type: ignore[index]
    assert fake.get_object("PodDisruptionBudget", "other", NS)["status"]["disruptionsAllowed"] == 0  # type: ignore[index]
    # Pods that are not running skip the PDB check, as on the real server.
    pending = pod("web-3")
    pending["status"]["phase"] = "Pending"
    fake.put_object(pending)
    assert evict(v1, "web-3") == 201
    assert fake.get_object("Pod", "web-3", NS) is None
    # Two matching PDBs: the real server refuses with 500; the fake does so when asked to.
    fake.put_object(pdb("web", 5))
    fake.put_object(pdb("web-too", 5))
    fake.multi_pdb_error = True
    status, body = api_error(lambda: v1.create_namespaced_pod_eviction("web-1", NS, eviction("web-1")))
    assert status == 500 and "more than one PodDisruptionBudget" in body["message"]
    fake.multi_pdb_error = False
    assert evict(v1, "web-1") == 201
    allowed = {
        p["metadata"]["name"]: p["status"]["disruptionsAllowed"] for p in fake.objects("PodDisruptionBudget")
    }
    assert allowed["web"] == allowed["web-too"] == 4


# -- leases, events, configmaps --------------------------------------------------------------------


def test_leases(fake: FakeKubeAPI, api: Any) -> None:
    coord: Any = k8s.CoordinationV1Api(api)
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "scaler", "namespace": "kube-system"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    status, _ = api_error(lambda: coord.read_namespaced_lease("scaler", "kube-system"))
    assert status == 404
    created = raw(coord.create_namespaced_lease("kube-system", lease, _preload_content=False))
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    assert created["spec"]["holderIdentity"] == "a"
    status, body = api_error(lambda: coord.create_namespaced_lease("kube-system", lease))
    assert (status, body["reason"]) == (409, "AlreadyExists")

    mine = raw(coord.read_namespaced_lease("scaler", "kube-system", _preload_content=False))
    theirs = json.loads(json.dumps(mine))
    mine["spec"]["holderIdentity"] = "b"
    updated = raw(coord.replace_namespaced_lease("scaler", "kube-system", mine, _preload_content=False))
    assert updated["spec"]["holderIdentity"] == "b"
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    theirs["spec"]["holderIdentity"] = "c"  # a competing candidate with the old version loses
    status, body = api_error(lambda: coord.replace_namespaced_lease("scaler", "kube-system", theirs))
    assert (status, body["reason"]) == (409, "Conflict")
    assert coord.read_namespaced_lease("scaler", "kube-system").spec.holder_identity == "b"


def test_events_both_apis(fake: FakeKubeAPI, api: Any) -> None:
    core: Any = k8s.CoreV1Api(api)
    events: Any = k8s.EventsV1Api(api)
    core_event = core.create_namespaced_event(
        NS,
        {
            "metadata": {"generateName": "n1."},
            "involvedObject": {"kind": "Node", "name": "n1"},
            "reason": "ScaleDown",
            "message": "draining",
            "type": "Normal",
        },
        _preload_content=False,
    )
    assert done(core_event) == 201
    new_event = events.create_namespaced_event(
        NS,
        {
            "metadata": {"name": "n2.1"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "regarding": {"kind": "Node", "name": "n2"},
            "reason": "ScaleDown",
            "note": "deleted",
            "action": "Delete",
            "reportingController": "scaler",
            "reportingInstance": "scaler-0",
            "type": "Normal",
        },
        _preload_content=False,
    )
    assert done(new_event) == 201
    got = fake.events()
    assert [(e["apiVersion"], e["reason"]) for e in got] == [
        ("v1", "ScaleDown"),
        ("events.k8s.io/v1", "ScaleDown"),
    ]
    assert got[0]["metadata"]["name"].startswith("n1.") and got[0]["metadata"]["namespace"] == NS
    assert got[1]["regarding"]["name"] == "n2" and got[1]["note"] == "deleted"
    assert len(core.list_namespaced_event(NS).items) == 1


def test_configmaps(fake: FakeKubeAPI, v1: Any) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "scaler-status"}, "data": {"a": "1"}}
    created = raw(v1.create_namespaced_config_map(NS, cm, _preload_content=False))
    assert created["metadata"]["namespace"] == NS
    patched = raw(
        v1.patch_namespaced_config_map(
            "scaler-status",
            NS,
            {"data": {"b": "2"}},
            _content_type="application/merge-patch+json",
            _preload_content=False,
        )
    )
    assert patched["data"] == {"a": "1", "b": "2"}
    patched["data"] = {"c": "3"}
    replaced = raw(v1.replace_namespaced_config_map("scaler-status", NS, patched, _preload_content=False))
    assert replaced["data"] == {"c": "3"}
    assert raw(v1.read_namespaced_config_map("scaler-status", NS, _preload_content=False)) == replaced
    status, _ = api_error(lambda: v1.replace_namespaced_config_map("scaler-status", NS, patched))
    assert status == 409  # patched carries an older resourceVersion
    status, _ = api_error(
        lambda: v1.replace_namespaced_config_map("missing", NS, {**cm, "metadata": {"name": "missing"}})
    )
    assert status == 404


def test_metrics_are_read_only(fake: FakeKubeAPI, api: Any) -> None:
    custom = k8s.CustomObjectsApi(api)
    status, body = api_error(
        lambda: custom.patch_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes", "n1", {"usage": {}})
    )
    assert (status, body["reason"]) == (405, "MethodNotAllowed")


# -- watch -----------------------------------------------------------------------------------------


def watch_lines(api: Any, path: str, **query: Any) -> Iterator[dict[str, Any]]:
    """Raw watch events from ``path`` via the client's generic call, decoded line by line."""
    params = [("watch", "true"), *((k, str(v)) for k, v in query.items())]
    resp = api.call_api(*api.param_serialize("GET", path, query_params=params, auth_settings=["BearerToken"]))
    buffer = b""
    complete = False
    try:
        for chunk in resp.response.stream(amt=None):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                yield json.loads(line)
        complete = True
    finally:
        if not complete:  # never pool a connection with unread data on it
            resp.response.close()
        resp.response.release_conn()


def test_watch_with_the_client_watch_helper(fake: FakeKubeAPI, v1: Any) -> None:
    listed = raw(v1.list_node(_preload_content=False))
    rv = listed["metadata"]["resourceVersion"]
    got: list[tuple[str, str]] = []

    def writer() -> None:  # once the stream is open: the events arrive on it, not in a relist
        wait_for(lambda: fake.open_watches("/api/v1/nodes") == 1, what="the watch stream")
        fake.put_object(node("n3"))
        fake.put_object(node("n3", unschedulable=True))
        fake.delete_object("Node", "n1")

    thread = threading.Thread(target=writer)
    thread.start()
    w = k8s_watch.Watch()
    for event in w.stream(v1.list_node, resource_version=rv, timeout_seconds=5, deserialize=False):
        got.append((event["type"], event["object"]["metadata"]["name"]))
        if len(got) == 3:
            w.stop()
    thread.join()
    assert got == [("ADDED", "n3"), ("MODIFIED", "n3"), ("DELETED", "n1")]


def test_watch_replay_bookmarks_and_timeout(fake: FakeKubeAPI, api: Any) -> None:
    rv = fake.resource_version
    fake.put_object(pod("web-3"))
    fake.put_object(node("n3"))  # another kind: not in the pods watch
    fake.delete_object("Pod", "web-1", NS)
    events = list(  # returns: the server ends the watch at timeoutSeconds
        watch_lines(api, "/api/v1/pods", resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds=1)
    )
    assert fake.open_watches("/api/v1/pods") == 0
    changes = [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"]
    assert changes == [("ADDED", "web-3"), ("DELETED", "web-1")]
    assert all(e["object"]["kind"] == "Pod" and e["object"]["apiVersion"] == "v1" for e in events)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > rv
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) == fake.resource_version
    # Namespaced watch, from "0": synthetic ADDED for the current state; no bookmarks unasked.
    events = list(watch_lines(api, f"/api/v1/namespaces/{NS}/pods", resourceVersion="0", timeoutSeconds=0.3))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "web-2"),
        ("ADDED", "web-3"),
    ]


def test_watch_too_old_resource_version(fake: FakeKubeAPI, api: Any, v1: Any) -> None:
    rv = fake.resource_version
    fake.expire_history()
    (event,) = watch_lines(api, "/api/v1/nodes", resourceVersion=rv, timeoutSeconds=5)
    assert event["type"] == "ERROR"
    assert (event["object"]["kind"], event["object"]["code"], event["object"]["reason"]) == (
        "Status",
        410,
        "Expired",
    )
    # The client's Watch helper turns it into ApiException(410) when it may not retry (only
    # with deserialize=True: with deserialize=False, client 37.0.2 fails on ERROR events with a
    # KeyError on 'raw_object').
    with pytest.raises(ApiException) as err:
        list(k8s_watch.Watch().stream(v1.list_node, resource_version=str(rv), timeout_seconds=1))
    assert err.value.status == 410
    # The new current version can be watched.
    assert (
        list(watch_lines(api, "/api/v1/nodes", resourceVersion=fake.resource_version, timeoutSeconds=0.3))
        == []
    )
    # As an HTTP status instead of an ERROR event.
    fake.watch_gone_as_http = True
    status, body = api_error(
        lambda: v1.list_node(watch=True, resource_version=str(rv), _preload_content=False)
    )
    assert (status, body["code"]) == (410, 410)
    # A small history window compacts by itself.
    fake.history_size = 2
    old = fake.resource_version
    for i in range(3):
        fake.put_object(node(f"x{i}"))
    status, _ = api_error(lambda: v1.list_node(watch=True, resource_version=str(old), _preload_content=False))
    assert status == 410


def test_drop_watches(fake: FakeKubeAPI, api: Any) -> None:
    results: dict[str, Any] = {}

    def consume(name: str) -> None:
        try:
            results[name] = list(
                watch_lines(api, "/api/v1/nodes", resourceVersion=fake.resource_version, timeoutSeconds=30)
            )
        except Exception as e:
            results[name] = e

    threads = [threading.Thread(target=consume, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    wait_for(lambda: fake.open_watches("/api/v1/nodes") == 2)
    assert fake.drop_watches() == 2
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads) and results == {"a": [], "b": []}
    assert fake.open_watches() == 0
    # Abrupt: the connection is cut mid-stream, the client sees a protocol error.
    thread = threading.Thread(target=consume, args=("c",))
    thread.start()
    wait_for(lambda: fake.open_watches() == 1)
    fake.drop_watches(abrupt=True)
    thread.join(5)
    assert isinstance(results["c"], urllib3.exceptions.ProtocolError)


def test_watch_of_a_client_that_hangs_up_is_released(fake: FakeKubeAPI, api: Any) -> None:
    resp: Any = k8s.CoreV1Api(api).list_node(watch=True, timeout_seconds=30, _preload_content=False)
    wait_for(lambda: fake.open_watches() == 1)
    resp.close()
    wait_for(lambda: fake.open_watches() == 0)


def test_label_and_field_selectors(fake: FakeKubeAPI, v1: Any, api: Any) -> None:
    elsewhere = pod("db-0", app="db")
    elsewhere["spec"]["nodeName"] = "n2"
    fake.put_object(elsewhere)

    def names(**selectors: Any) -> list[str]:
        listed = raw(v1.list_pod_for_all_namespaces(_preload_content=False, **selectors))
        return [p["metadata"]["name"] for p in listed["items"]]

    assert names() == ["db-0", "web-1", "web-2"]
    assert names(field_selector="spec.nodeName=n1") == ["web-1", "web-2"]
    assert names(field_selector="spec.nodeName!=n1,status.phase=Running") == ["db-0"]
    assert names(label_selector="app in (db, cache)") == ["db-0"]
    assert names(label_selector="app,app!=db") == ["web-1", "web-2"]
    assert names(label_selector="!app") == []
    assert names(field_selector="spec.nodeName=n1", limit=1) == ["web-1"]  # paginated after filtering
    status, _ = api_error(lambda: v1.list_pod_for_all_namespaces(label_selector="app in"))
    assert status == 400
    # A filtered watch only sees matching objects.
    rv = fake.resource_version
    fake.put_object(pod("web-3"))
    moved = pod("db-1", app="db")
    moved["spec"]["nodeName"] = "n2"
    fake.put_object(moved)
    events = watch_lines(
        api, "/api/v1/pods", resourceVersion=rv, fieldSelector="spec.nodeName=n2", timeoutSeconds=0.3
    )
    assert [e["object"]["metadata"]["name"] for e in events] == ["db-1"]


# -- fault injection and recording -----------------------------------------------------------------


def test_faults_by_method_exact_path_and_after(fake: FakeKubeAPI, v1: Any) -> None:
    path = f"/api/v1/namespaces/{NS}/pods/web-1/eviction"
    fake.fail(path, 503, times=1, method="POST")
    fake.fail(f"/api/v1/namespaces/{NS}/pods/web-1", 500, exact=True, method="GET")
    status, _ = api_error(lambda: v1.create_namespaced_pod_eviction("web-1", NS, eviction("web-1")))
    assert status == 503
    status, _ = api_error(lambda: v1.read_namespaced_pod("web-1", NS))
    assert status == 500
    assert v1.read_namespaced_pod("web-2", NS).metadata.name == "web-2"  # a sibling path is served
    # after=True: the eviction happens, only its answer is lost.
    fake.reset_faults()
    fake.grace_scale = 0.0
    fake.fail(path, 500, times=1, method="POST", after=True)
    status, _ = api_error(lambda: v1.create_namespaced_pod_eviction("web-1", NS, eviction("web-1")))
    assert status == 500 and fake.get_object("Pod", "web-1", NS) is None
    # Latency per method: the GETs are slow, the PATCH is not.
    # One delay for GETs: the PATCH does not use it up, so the GET after it is still delayed (a
    # sleep is never shorter than asked: the lower bound cannot fail on a slow machine).
    fake.delay("/api/v1/nodes", 0.3, times=1, method="GET")
    done(v1.patch_node("n1", {"metadata": {"labels": {"a": "b"}}}, _preload_content=False))
    start = time.monotonic()
    done(v1.read_node("n1", _preload_content=False))
    assert time.monotonic() - start >= 0.3


def test_requests_are_recorded(fake: FakeKubeAPI, v1: Any) -> None:
    fake.requests.clear()
    done(v1.patch_node("n2", {"spec": {"unschedulable": True}}, _preload_content=False))
    done(v1.list_node(limit=1, _preload_content=False))
    patch, listing = fake.requests
    assert (patch.method, patch.path, json.loads(patch.body)) == (
        "PATCH",
        "/api/v1/nodes/n2",
        {"spec": {"unschedulable": True}},
    )
    assert (listing.method, listing.path, listing.query["limit"], listing.watch) == (
        "GET",
        "/api/v1/nodes",
        "1",
        False,
    )
    assert fake.requests_to("/api/v1/nodes/n2", "PATCH") == [patch]


# -- pods/resize and pods/status (in-place resize, KEP-1287) ---------------------------------------
#
# The fake's answers are checked against upstream's own table: kubernetes
# test/e2e/common/node/pod_resize.go, doPodResizeTests (a resize that succeeds) and
# doPodResizeErrorTests (each entry below names its test case), which patch with a strategic merge
# patch through the resize subresource and expect these error substrings.

ORIGINAL = {"cpu": "20m", "memory": "20Mi"}
ORIGINAL_LIMIT = {"cpu": "30m", "memory": "30Mi"}


def resizable(name: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    obj = pod(name)
    obj["spec"]["containers"] = containers
    return obj


def c(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = dict(requests)
    if limits:
        res["limits"] = dict(limits)
    return {"name": name, "image": "i", **({"resources": res} if res else {})}


def resize(v1: Any, name: str, patch: dict[str, Any]) -> Any:
    return v1.patch_namespaced_pod_resize(name, NS, patch, _preload_content=False)


RESIZE_ERRORS = [
    (  # "BestEffort pod - try requesting memory, expect error"
        [c("c1")],
        {"spec": {"containers": [{"name": "c1", "resources": {"requests": {"memory": "40Mi"}}}]}},
        "Pod QOS Class may not change as a result of resizing",
    ),
    (  # "Burstable QoS pod, one container with cpu & memory requests + limits - remove memory limits"
        [c("c1", ORIGINAL, ORIGINAL_LIMIT)],
        {"spec": {"containers": [{"name": "c1", "resources": {"limits": {"memory": None}}}]}},
        "resource limits cannot be removed",
    ),
    (  # "... - remove CPU limits"
        [c("c1", ORIGINAL, ORIGINAL_LIMIT)],
        {"spec": {"containers": [{"name": "c1", "resources": {"limits": {"cpu": None}}}]}},
        "resource limits cannot be removed",
    ),
    (  # "Burstable QoS pod, one container with memory requests + limits, cpu requests - remove CPU requests"
        [c("c1", ORIGINAL, {"memory": "30Mi"})],
        {"spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": None}}}]}},
        "resource requests cannot be removed",
    ),
    (  # "Burstable QoS pod, one container with CPU requests + limits, cpu requests - remove memory requests"
        [c("c1", ORIGINAL, {"cpu": "30m"})],
        {"spec": {"containers": [{"name": "c1", "resources": {"requests": {"memory": None}}}]}},
        "resource requests cannot be removed",
    ),
    (  # "Burstable QoS pod, two containers with cpu & memory requests + limits - reorder containers"
        [c("c1", ORIGINAL, ORIGINAL_LIMIT), c("c2", ORIGINAL, ORIGINAL_LIMIT)],
        {
            "spec": {
                "containers": [
                    {"name": "c2", "resources": {"requests": ORIGINAL, "limits": ORIGINAL_LIMIT}},
                    {"name": "c1", "resources": {"requests": ORIGINAL, "limits": ORIGINAL_LIMIT}},
                ]
            }
        },
        "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize, "
        "spec.containers[1].name: Forbidden: containers may not be renamed or reordered on resize",
    ),
]


@pytest.mark.parametrize(("containers", "patch", "message"), RESIZE_ERRORS)
def test_resize_refusals_follow_the_upstream_table(
    fake: FakeKubeAPI, v1: Any, containers: list[dict[str, Any]], patch: dict[str, Any], message: str
) -> None:
    """Each refusal of upstream's doPodResizeErrorTests: ``422``, the same words, the pod as it
    was (spec, status and generation)."""
    fake.load_objects([resizable("r", containers)])
    before = v1.read_namespaced_pod("r", NS).to_dict()
    code, body = api_error(lambda: resize(v1, "r", patch))
    assert code == 422 and body["reason"] == "Invalid", body
    assert message in body["message"], body["message"]
    assert v1.read_namespaced_pod("r", NS).to_dict() == before


def test_resize_changes_only_cpu_and_memory_and_status_is_the_kubelets(fake: FakeKubeAPI, v1: Any) -> None:
    """doPodResizeTests, "Burstable QoS pod, one container with cpu & memory requests + limits -
    increase CPU & memory" with a second container left alone: the resize patches ``c1`` by
    name (``c2`` keeps its place), bumps ``metadata.generation``, leaves the status to the
    kubelet, and anything but CPU and memory (an image, another resource, a plain init
    container's resources) is refused. ``pods/status`` changes the status only."""
    obj = resizable("r", [c("c1", ORIGINAL, ORIGINAL_LIMIT), c("c2", ORIGINAL, ORIGINAL_LIMIT)])
    obj["spec"]["initContainers"] = [c("init", ORIGINAL)]
    fake.load_objects([obj])
    patch = {"spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": "25m", "memory": "25Mi"},
                                                                  "limits": {"cpu": "35m", "memory": "35Mi"}}}]}}  # fmt: skip
    out = raw(resize(v1, "r", patch))
    assert [x["name"] for x in out["spec"]["containers"]] == ["c1", "c2"]
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "25m", "memory": "25Mi"}
    assert out["spec"]["containers"][0]["image"] == "i" and out["spec"]["containers"][1] == obj["spec"]["containers"][1]
    assert out["metadata"]["generation"] == 2 and out["status"] == {"phase": "Running"}
    assert raw(v1.read_namespaced_pod_resize("r", NS, _preload_content=False))["spec"] == out["spec"]
    image = {"spec": {"containers": [{"name": "c1", "image": "other"}]}}
    assert "only cpu and memory resources are mutable" in api_error(lambda: resize(v1, "r", image))[1]["message"]
    disk = {"spec": {"containers": [{"name": "c1", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}]}}
    assert "only cpu and memory resources are mutable" in api_error(lambda: resize(v1, "r", disk))[1]["message"]
    init = {"spec": {"initContainers": [{"name": "init", "resources": {"requests": {"cpu": "25m"}}}]}}
    message = api_error(lambda: resize(v1, "r", init))[1]["message"]
    assert "resources for non-sidecar init containers are immutable" in message
    status = {
        "spec": {"nodeName": "elsewhere"},
        "status": {
            "conditions": [{"type": "PodResizeInProgress", "status": "True"}],
            "containerStatuses": [
                {"name": "c1", "allocatedResources": {"cpu": "25m", "memory": "25Mi"},
                 "resources": {"requests": {"cpu": "20m", "memory": "20Mi"}}}
            ],
        },
    }  # fmt: skip
    out = raw(v1.patch_namespaced_pod_status("r", NS, status, _preload_content=False))
    assert out["spec"]["nodeName"] == "n1", "the status subresource changes the status only"
    assert out["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "25m"
    assert out["status"]["phase"] == "Running"
