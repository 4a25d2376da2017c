"""The watch-based cache against the loopback fake API server (real HTTP, bounded in time)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.kube_api import FakeKubeAPI
from kubernetes import client as k8s
from waiting import wait_for

from scaler.model.records import Taint
from scaler.model.snapshot import ClusterSnapshot
from scaler.sources.files import load_objects
from scaler.sources.kube import READ_CALLS, list_pages, load_live_snapshot
from scaler.sources.watch import (
    METRICS_CALLS,
    WATCH_CALLS,
    WATCHED_CALLS,
    CacheNotSynced,
    WatchCache,
    fetch_metrics,
    snapshot_from_cache,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "scaler" / "examples" / "bitbrains-gke-day1"
POOL = "cloud.google.com/gke-nodepool"
METRICS_PATHS = {c.path for c in METRICS_CALLS}
N_KINDS = len(WATCHED_CALLS)
NOW = 1_800_000_000.0


@pytest.fixture(scope="module")
def example_objects() -> list[dict[str, Any]]:
    return list(load_objects([EXAMPLE]))


@pytest.fixture(scope="module")
def small_objects(example_objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The example with its first 150 pods (and their metrics) only: a quicker cluster."""
    pods = [o for o in example_objects if o["kind"] == "Pod"][:150]
    keep = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}
    return [
        o
        for o in example_objects
        if o["kind"] not in ("Pod", "PodMetrics")
        or (o["metadata"]["namespace"], o["metadata"]["name"]) in keep
    ]


@pytest.fixture
def cluster_objects(
    request: pytest.FixtureRequest, example_objects: list[dict[str, Any]], small_objects: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    return example_objects if getattr(request, "param", "small") == "full" else small_objects


FULL_EXAMPLE = pytest.mark.parametrize("cluster_objects", ["full"], indirect=True)
"""Run a test against the whole example cluster (1172 pods) instead of a 150-pod part of it."""


@pytest.fixture
def fake(cluster_objects: list[dict[str, Any]], no_proxy: None) -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI(bookmark_interval=0.1) as server:
        server.load_objects(cluster_objects)
        yield server


@pytest.fixture
def make_cache(api: Any) -> Iterator[Callable[..., WatchCache]]:
    caches: list[WatchCache] = []

    def make(start: bool = True, **kwargs: Any) -> WatchCache:
        kwargs = {"backoff_initial": 0.02, "backoff_max": 0.2, "page_size": 50, **kwargs}
        cache = WatchCache(api, **kwargs)
        caches.append(cache)
        if start:
            cache.start()
            assert cache.wait_synced(10)
        return cache

    yield make
    for cache in caches:
        cache.stop()


@pytest.fixture
def cache(make_cache: Callable[..., WatchCache], fake: FakeKubeAPI) -> WatchCache:
    cache = make_cache()
    wait_for(lambda: fake.open_watches() == N_KINDS)
    return cache



def find(cache: WatchCache, kind: str, name: str) -> Any:
    """The cached record of ``kind`` named ``name``, or ``None``."""
    return next((r for r in cache.records().by_kind[kind].values() if r.name == name), None)


def listed(api: Any) -> dict[str, dict[tuple[str, str], Any]]:
    """What a fresh LIST of every watched kind gives, keyed as the cache keys its records."""
    out = {}
    for call in WATCHED_CALLS:
        records, _ = list_pages(api, call, 500, 30)
        out[call.kind] = {(r.namespace if call.namespaced else "", r.name): r for r in records}
    return out


def a_pod(fake: FakeKubeAPI) -> dict[str, Any]:
    return fake.objects("Pod")[0]


def total(cache: WatchCache, counter: str) -> int:
    return sum(getattr(s, counter) for s in cache.stats.values())


def test_watched_calls_are_read_calls_without_metrics() -> None:
    assert WATCHED_CALLS + METRICS_CALLS == READ_CALLS
    assert {c.kind for c in METRICS_CALLS} == {"NodeMetrics", "PodMetrics"}
    assert [(c.path, c.verb) for c in WATCH_CALLS] == [(c.path, "watch") for c in WATCHED_CALLS]


@FULL_EXAMPLE
def test_initial_sync_equals_fetch_objects(cache: WatchCache, api: Any, fake: FakeKubeAPI) -> None:
    pods = fake.requests_to("/api/v1/pods")
    assert cache.records().by_kind == listed(api)
    assert cache.synced and cache.running
    assert all((s.lists, s.relists, s.errors, s.skipped) == (1, 0, 0, False) for s in cache.stats.values())
    # Paginated like fetch_objects, then one watch per kind from the list's resourceVersion.
    lists = [r for r in pods if not r.watch]
    (watch,) = [r for r in pods if r.watch]
    assert len(lists) == -(-len(fake.objects("Pod")) // 50) and lists[0].query["limit"] == "50"
    assert watch.query["allowWatchBookmarks"] == "true" and watch.query["timeoutSeconds"] == "300"
    assert int(watch.query["resourceVersion"]) == fake.resource_version
    # Immutable records, shared by every read (nothing is copied or parsed again per snapshot).
    key, pod = next(iter(cache.records().by_kind["Pod"].items()))
    assert cache.records().by_kind["Pod"][key] is pod
    with pytest.raises(AttributeError):
        pod.name = "mutated"  # type: ignore[misc]


def test_changes_flow_into_the_cache(cache: WatchCache, fake: FakeKubeAPI, api: Any) -> None:
    pod = a_pod(fake)
    name = pod["metadata"]["name"]
    new = {**pod, "metadata": {**pod["metadata"], "name": "new-pod", "uid": "new"}}
    fake.put_object(new)
    wait_for(lambda: find(cache, "Pod", "new-pod") is not None)
    # Through the API (the way the controller taints a node).
    node_name = fake.objects("Node")[0]["metadata"]["name"]
    taint = {"key": "scaler/drain", "effect": "NoSchedule"}
    resp: Any = k8s.CoreV1Api(api).patch_node(
        node_name, {"spec": {"taints": [taint]}}, _preload_content=False
    )
    assert resp.status == 200 and resp.data
    resp.release_conn()
    wait_for(lambda: find(cache, "Node", node_name).taints == (Taint("scaler/drain", "", "NoSchedule"),))
    fake.delete_object("Pod", name, pod["metadata"]["namespace"])
    wait_for(lambda: find(cache, "Pod", name) is None)
    fake.delete_object("PodDisruptionBudget", *reversed(_ns_name(fake.objects("PodDisruptionBudget")[0])))
    expected = listed(api)
    wait_for(lambda: cache.records().by_kind == expected)
    assert all(s.relists == 0 for s in cache.stats.values())
    assert cache.stats["Pod"].events >= 2 and cache.stats["Node"].events >= 1


@FULL_EXAMPLE
def test_steady_state_makes_only_the_metrics_lists(cache: WatchCache, fake: FakeKubeAPI, api: Any) -> None:
    fake.requests.clear()
    n = 3
    for _ in range(n):
        snap = snapshot_from_cache(cache, api, NOW)
    assert len(fake.requests) == 2 * n
    assert {r.path for r in fake.requests} == METRICS_PATHS and all(r.method == "GET" for r in fake.requests)
    assert _same_snapshot(snap, load_live_snapshot(api, NOW))


def test_snapshot_reflects_watched_changes(cache: WatchCache, fake: FakeKubeAPI, api: Any) -> None:
    node = fake.objects("Node")[0]
    name = node["metadata"]["name"]
    fake.put_object({**node, "spec": {**node.get("spec", {}), "unschedulable": True}})
    wait_for(lambda: find(cache, "Node", name).unschedulable)
    snap = snapshot_from_cache(cache, api, NOW)
    assert _same_snapshot(snap, load_live_snapshot(api, NOW))


def test_pods_are_regrouped_by_change_not_sorted_again(cache: WatchCache, fake: FakeKubeAPI, api: Any) -> None:
    layout = cache.records().pod_layout
    assert layout is not None and cache.records().pod_layout is layout  # nothing changed: kept
    pods = fake.objects("Pod")
    moved, deleted = pods[0], pods[1]
    src = moved["spec"]["nodeName"]
    dst = next(n["metadata"]["name"] for n in fake.objects("Node") if n["metadata"]["name"] != src)
    fake.put_object({**moved, "spec": {**moved["spec"], "nodeName": dst}})
    fake.put_object({**moved, "metadata": {**moved["metadata"], "name": "aaa-new", "uid": "new"}})
    fake.delete_object("Pod", deleted["metadata"]["name"], deleted["metadata"]["namespace"])
    wait_for(lambda: find(cache, "Pod", deleted["metadata"]["name"]) is None)
    wait_for(lambda: find(cache, "Pod", moved["metadata"]["name"]).node_name == dst)
    wait_for(lambda: find(cache, "Pod", "aaa-new") is not None)
    snap = snapshot_from_cache(cache, api, NOW)
    assert _same_snapshot(snap, load_live_snapshot(api, NOW))
    assert snap.pods[0].name == "aaa-new" and snap.pods_by_node[src][0].name == "aaa-new"
    after = cache.records().pod_layout
    assert after is not None and after is not layout
    touched = {src, dst, deleted["spec"]["nodeName"]}
    assert all(after.by_node[n] is group for n, group in layout.by_node.items() if n not in touched)
    assert cache.stats["Pod"].relists == 0


def test_a_malformed_object_is_left_out_and_its_node_named_until_it_is_fixed(
    cache: WatchCache, fake: FakeKubeAPI, api: Any
) -> None:
    """A pod that stops decoding (a watch event) is left out of the cache, named by
    :meth:`WatchCache.unreadable`; the snapshot is still built, with its node
    ``UnreadableObject``; once fixed, the snapshot is the LIST's again."""
    pod = next(p for p in fake.objects("Pod") if p["spec"].get("nodeName"))
    ns, name, node = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["spec"]["nodeName"]
    fake.put_object({**pod, "spec": {**pod["spec"], "priority": "high"}})
    wait_for(lambda: find(cache, "Pod", name) is None)
    assert [(u.kind, u.namespace, u.name, u.node) for u in cache.unreadable()] == [("Pod", ns, name, node)]
    assert cache.malformed() == [f"Pod {ns}/{name}: field 'spec.priority' must be an integer, got 'high'"]
    snap = snapshot_from_cache(cache, api, NOW)
    assert snap.unreadable == {
        node: f"cannot read Pod {ns}/{name}: field 'spec.priority' must be an integer, got 'high'"
    }
    assert cache.stale_kinds() == {}  # an unreadable object is not a stale kind
    fake.put_object(pod)
    wait_for(lambda: find(cache, "Pod", name) is not None)
    assert cache.unreadable() == []
    assert _same_snapshot(snapshot_from_cache(cache, api, NOW), load_live_snapshot(api, NOW))


def test_a_node_without_allocatable_does_not_fail_the_node_list(
    make_cache: Callable[..., WatchCache], fake: FakeKubeAPI, api: Any
) -> None:
    """A Node without ``status.allocatable`` (a Node registered without a kubelet status)
    failed the whole Node LIST, so the cache never synced. Now the LIST is cached without it,
    the node stands in the snapshot as a placeholder (its labels, no allocatable) that is never
    a candidate nor a destination, and the other nodes are as listed."""
    fake.put_object(
        {"kind": "Node", "metadata": {"name": "raw-node", "uid": "u-raw", "labels": {POOL: "pool-x"}}}
    )
    cache = make_cache()
    assert "Node" not in cache.stale_kinds()
    assert [u.display for u in cache.unreadable()] == ["Node raw-node"]
    snap = snapshot_from_cache(cache, api, NOW)
    assert snap.unreadable == {
        "raw-node": "cannot read Node raw-node: missing required field 'status.allocatable'"
    }
    placeholder = snap.node_by_name["raw-node"]
    assert (placeholder.node_group, placeholder.uid, placeholder.allocatable.cpu_millicores) == (
        "pool-x",
        "u-raw",
        0,
    )
    others = {n.name for n in snap.nodes} - {"raw-node"}
    assert others == {n["metadata"]["name"] for n in fake.objects("Node")} - {"raw-node"}
    fake.delete_object("Node", "raw-node")
    wait_for(lambda: cache.unreadable() == [])


def test_dropped_watches_rewatch_and_broken_ones_relist(cache: WatchCache, fake: FakeKubeAPI) -> None:
    """A watch the server ends cleanly is watched again from where it was, no LIST, the kind
    fresh; a broken one (cut mid-stream) makes its kind stale until it is listed again."""
    watches = total(cache, "watches")
    lists = len([r for r in fake.requests if not r.watch])
    assert fake.drop_watches() == N_KINDS
    wait_for(lambda: fake.open_watches() == N_KINDS and total(cache, "watches") >= watches + N_KINDS)
    assert all((s.lists, s.relists, s.errors) == (1, 0, 0) for s in cache.stats.values())
    assert len([r for r in fake.requests if not r.watch]) == lists
    assert cache.stale_kinds() == {}
    # Nothing was missed: a change made while the watches were down arrives through the replay.
    fake.drop_watches()
    pod = a_pod(fake)
    fake.delete_object("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    wait_for(lambda: find(cache, "Pod", pod["metadata"]["name"]) is None)
    assert cache.stats["Pod"].relists == 0
    wait_for(lambda: fake.open_watches() == N_KINDS)
    # Cut: an error; each kind relists, and is stale until then.
    fake.delay("/api/v1/nodes", 0.5, times=1, match=lambda r: not r.watch)
    assert fake.drop_watches(abrupt=True) == N_KINDS
    wait_for(lambda: "Node" in cache.stale_kinds())
    assert cache.stale_kinds()["Node"].startswith("watch stream broken")
    wait_for(lambda: all(s.relists == 1 for s in cache.stats.values()) and cache.stale_kinds() == {})
    assert total(cache, "errors") == N_KINDS


@pytest.mark.parametrize("mode", ["watch-start-error-event", "error-event-on-open-stream", "http-410"])
def test_expired_history_relists(cache: WatchCache, fake: FakeKubeAPI, api: Any, mode: str) -> None:
    fake.watch_gone_as_http = mode == "http-410"
    pod = a_pod(fake)
    fake.expire_history(notify=mode == "error-event-on-open-stream")
    # Lost from the history: only a relist can notice this deletion.
    fake.delete_object("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    fake.expire_history()
    wait_for(lambda: all(s.relists >= 1 for s in cache.stats.values()))
    wait_for(lambda: find(cache, "Pod", pod["metadata"]["name"]) is None)
    expected = listed(api)
    wait_for(lambda: cache.records().by_kind == expected)
    wait_for(lambda: fake.open_watches() == N_KINDS)
    assert total(cache, "errors") == 0


def test_a_kind_is_stale_from_its_410_until_its_relist_completes(
    cache: WatchCache, fake: FakeKubeAPI, api: Any
) -> None:
    """After a 410 the pods are relisted; while the (slow) relist runs the Pod kind is stale,
    with why, and the runner's view says so; it is fresh once the LIST completed."""
    fake.delay("/api/v1/pods", 1.5, times=1, match=lambda r: not r.watch)
    fake.expire_history(notify=True)
    wait_for(lambda: "Pod" in cache.stale_kinds(), timeout=5)
    why = cache.stale_kinds()["Pod"]
    assert why.startswith("relisting after watch ERROR 410"), why
    assert cache.stats["Pod"].relists == 0  # the relist is under way
    wait_for(lambda: cache.stats["Pod"].relists == 1, timeout=10)
    assert "Pod" not in cache.stale_kinds()


def test_a_429_makes_the_kind_stale_and_its_retry_after_is_honoured(
    make_cache: Callable[..., WatchCache], fake: FakeKubeAPI
) -> None:
    """API Priority and Fairness sheds the pod WATCH, then the relist, with 429 and
    ``Retry-After: 1``: the kind is stale from the first 429, the next request waits at least
    the second asked (the cache's own backoff is 20 ms), and it is fresh after the LIST."""
    cache = make_cache()
    wait_for(lambda: fake.open_watches("/api/v1/pods") == 1)
    fake.fail("/api/v1/pods", 429, times=1, match=lambda r: r.watch, headers={"Retry-After": "1"})
    fake.fail("/api/v1/pods", 429, times=1, match=lambda r: not r.watch, headers={"Retry-After": "1"})
    fake.drop_watches()
    wait_for(lambda: cache.stale_kinds().get("Pod", "").startswith("watch failed: HTTP 429"), timeout=5)
    wait_for(lambda: cache.stats["Pod"].relists == 1 and "Pod" not in cache.stale_kinds(), timeout=10)
    pods = [r for r in fake.requests_to("/api/v1/pods")]
    shed = [i for i, r in enumerate(pods) if i + 1 < len(pods) and r.received >= pods[-1].received - 10]
    gaps = [pods[i + 1].received - pods[i].received for i in range(len(pods) - 1)]
    # the 429'd watch, the 429'd list, then the list that passed: each after >= 1 s
    assert shed and sorted(gaps)[-2] >= 1.0 and sorted(gaps)[-1] >= 1.0, gaps
    assert cache.stats["Pod"].errors == 2


def test_watch_errors_back_off_relist_and_recover(cache: WatchCache, fake: FakeKubeAPI) -> None:
    fake.fail("/api/v1/pods", 500, times=3, match=lambda r: r.watch)
    start = time.monotonic()
    fake.drop_watches()
    wait_for(lambda: cache.stats["Pod"].consecutive_errors >= 1)
    assert "Pod" in cache.stale_kinds()
    wait_for(lambda: cache.stats["Pod"].errors == 3 and fake.open_watches("/api/v1/pods") == 1)
    # Three failures: waits of at least 0.01 + 0.02 + 0.04 s (backoff 0.02 s doubling, jitter >= 1/2).
    assert time.monotonic() - start >= 0.07
    wait_for(lambda: "Pod" not in cache.stale_kinds())
    assert cache.stats["Pod"].relists == 3  # each failed watch: a LIST before the next watch
    pod = a_pod(fake)
    fake.delete_object("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    wait_for(lambda: find(cache, "Pod", pod["metadata"]["name"]) is None)
    wait_for(lambda: cache.stats["Pod"].consecutive_errors == 0)
    # A malformed event line: an error, then a relist and a watch from there.
    fake.fail("/api/v1/nodes", 200, times=1, match=lambda r: r.watch, body=b'{"type": "ADDED"\n')
    fake.drop_watches()
    wait_for(lambda: cache.stats["Node"].errors == 1 and fake.open_watches("/api/v1/nodes") == 1)
    wait_for(lambda: cache.stats["Node"].relists == 1 and "Node" not in cache.stale_kinds())


def test_list_errors_and_optional_kinds(
    make_cache: Callable[..., WatchCache], fake: FakeKubeAPI, caplog: Any
) -> None:
    fake.fail("/api/v1/persistentvolumes", 403)
    fake.fail("/api/v1/persistentvolumeclaims", 403, match=lambda r: r.watch)  # list, but no watch
    fake.fail("/api/v1/pods", 500, times=2, match=lambda r: not r.watch)
    fake.fail("/api/v1/replicationcontrollers", 410, times=1, match=lambda r: "continue" in r.query)
    fake.load_objects(
        {"kind": "ReplicationController", "metadata": {"name": f"rc-{i:03}", "namespace": "x"}}
        for i in range(250)
    )
    with caplog.at_level(logging.WARNING, logger="scaler.sources.watch"):
        cache = make_cache(page_size=100)
    assert cache.stats["PersistentVolume"].skipped and cache.stats["PersistentVolume"].watches == 0
    wait_for(lambda: cache.stats["PersistentVolumeClaim"].skipped)
    assert (
        cache.stats["PersistentVolumeClaim"].watches == 1 and not cache.stats["PersistentVolumeClaim"].errors
    )
    assert (cache.stats["Pod"].errors, cache.stats["Pod"].lists) == (2, 1)
    assert len(cache.records().by_kind["ReplicationController"]) == 250
    rc_lists = [r for r in fake.requests_to("/api/v1/replicationcontrollers") if not r.watch]
    assert len(rc_lists) == 2 + 3  # page 1, expired page 2, then pages 1-3 again
    assert len(cache.records().by_kind["Pod"]) == len(fake.objects("Pod"))
    assert any("persistentvolumes" in r.getMessage() and "403" in r.getMessage() for r in caplog.records)


def test_an_optional_kind_refused_is_listed_again_later_and_cached_once_allowed(
    make_cache: Callable[..., WatchCache], fake: FakeKubeAPI, caplog: Any
) -> None:
    """After a kube-apiserver restart RBAC may answer 403 for a while: an optional kind refused
    (its LIST twice, another's WATCH once) is skipped, with one warning, and LISTed again with
    backoff; once allowed it is cached and watched like any kind."""
    fake.load_objects([{"kind": "PersistentVolume", "metadata": {"name": f"pv-{i}"}} for i in range(3)])
    fake.load_objects(
        [{"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "x"}}]
    )
    fake.fail("/api/v1/persistentvolumes", 403, times=2)
    fake.fail("/api/v1/persistentvolumeclaims", 404, times=1, match=lambda r: r.watch)
    with caplog.at_level(logging.DEBUG, logger="scaler.sources.watch"):
        cache = make_cache(optional_retry_initial=0.05, optional_retry_max=0.1)
        wait_for(lambda: len(cache.records().by_kind["PersistentVolume"]) == 3)
        wait_for(lambda: len(cache.records().by_kind["PersistentVolumeClaim"]) == 1)
        pv, pvc = cache.stats["PersistentVolume"], cache.stats["PersistentVolumeClaim"]
        assert (pv.skips, pv.skipped, pvc.skips, pvc.skipped) == (2, False, 1, False)
        wait_for(lambda: fake.open_watches("/api/v1/persistentvolumes") == 1)
        fake.put_object({"kind": "PersistentVolume", "metadata": {"name": "pv-new"}})
        wait_for(lambda: len(cache.records().by_kind["PersistentVolume"]) == 4)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([m for m in warnings if "persistentvolumes" in m]) == 1, warnings  # once per run of refusals
    assert any("readable again" in r.getMessage() for r in caplog.records)


def test_snapshot_needs_a_synced_cache(
    make_cache: Callable[..., WatchCache], api: Any, fake: FakeKubeAPI
) -> None:
    cache = make_cache(start=False)
    with pytest.raises(CacheNotSynced, match="Node"):
        snapshot_from_cache(cache, api, NOW)
    fake.delay("/api/v1/pods", 0.5, times=1)
    cache.start()
    assert not cache.wait_synced(0.1)
    assert cache.wait_synced(5)
    fake.fail("/apis/metrics.k8s.io", 503, times=1)
    with pytest.raises(Exception, match=r"metrics\.k8s\.io.*503"):
        snapshot_from_cache(cache, api, NOW)
    assert len(fetch_metrics(api)) == len(fake.objects("NodeMetrics")) + len(fake.objects("PodMetrics"))


def test_stop_ends_all_threads_promptly(make_cache: Callable[..., WatchCache], fake: FakeKubeAPI) -> None:
    cache = make_cache(bookmarks=False)  # idle streams: nothing would wake the readers
    wait_for(lambda: fake.open_watches() == N_KINDS)
    cache.stop()  # cuts the idle streams: every thread ends within stop's own wait
    assert not cache.running
    wait_for(lambda: fake.open_watches() == 0)
    assert cache.records().by_kind["Pod"]  # still readable
    # A cache stopped while backing off stops promptly too.
    fake.fail("/api/v1/nodes", 500)
    # A back-off far longer than stop's wait: a thread still sleeping it would outlive stop().
    failing = make_cache(start=False, backoff_initial=60, backoff_max=60)
    failing.start()
    wait_for(lambda: failing.stats["Node"].errors >= 1)
    failing.stop(timeout=10)
    assert not failing.running


def test_invalid_arguments(api: Any) -> None:
    with pytest.raises(ValueError, match="page_size"):
        WatchCache(api, page_size=0)
    with pytest.raises(ValueError, match="backoff"):
        WatchCache(api, backoff_initial=2, backoff_max=1)
    with pytest.raises(ValueError, match="metrics"):
        WatchCache(api, READ_CALLS)
    with pytest.raises(ValueError, match="twice"):
        WatchCache(api, WATCHED_CALLS[:1] * 2)


# -- helpers ---------------------------------------------------------------------------------------


def _ns_name(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["metadata"].get("namespace") or "", obj["metadata"]["name"])


def _same_snapshot(a: ClusterSnapshot, b: ClusterSnapshot) -> bool:
    return (
        a.now,
        a.nodes,
        a.pods,
        a.pdbs,
        a.controllers,
        a.node_metrics,
        a.pod_metrics,
        a.workload_kinds,
        a.pods_by_node,
    ) == (
        b.now,
        b.nodes,
        b.pods,
        b.pdbs,
        b.controllers,
        b.node_metrics,
        b.pod_metrics,
        b.workload_kinds,
        b.pods_by_node,
    )
