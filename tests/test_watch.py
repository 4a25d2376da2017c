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
from scaler.model.snapshot import ClusterSnapshot, SnapshotError
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


def test_a_malformed_object_is_named_until_it_is_fixed(cache: WatchCache, fake: FakeKubeAPI, api: Any) -> None:
    pod = a_pod(fake)
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    bad = {**pod, "spec": {**pod["spec"], "priority": "high"}}
    fake.put_object(bad)
    message = f"pods: Pod {ns}/{name}: field 'spec.priority' must be an integer, got 'high'"
    wait_for(lambda: find(cache, "Pod", name) is None)
    with pytest.raises(SnapshotError) as e:
        snapshot_from_cache(cache, api, NOW)
    assert str(e.value) == message
    fake.put_object(pod)
    wait_for(lambda: find(cache, "Pod", name) is not None)
    assert _same_snapshot(snapshot_from_cache(cache, api, NOW), load_live_snapshot(api, NOW))


def test_dropped_watches_rewatch_without_relisting(cache: WatchCache, fake: FakeKubeAPI) -> None:
    watches = total(cache, "watches")
    lists = len([r for r in fake.requests if not r.watch])
    for abrupt in (False, True):
        assert fake.drop_watches(abrupt=abrupt) == N_KINDS
        target = watches + N_KINDS

        def rewatched(t: int = target) -> bool:
            return fake.open_watches() == N_KINDS and total(cache, "watches") >= t

        wait_for(rewatched)
        watches = total(cache, "watches")
    assert all((s.lists, s.relists) == (1, 0) for s in cache.stats.values())
    assert total(cache, "errors") >= N_KINDS  # the abrupt cut is an error, the clean end is not
    assert len([r for r in fake.requests if not r.watch]) == lists
    # Nothing was missed: a change made while the watches were down arrives through the replay.
    fake.drop_watches()
    pod = a_pod(fake)
    fake.delete_object("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    wait_for(lambda: find(cache, "Pod", pod["metadata"]["name"]) is None)
    assert cache.stats["Pod"].relists == 0


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


def test_watch_errors_back_off_and_recover(cache: WatchCache, fake: FakeKubeAPI) -> None:
    fake.fail("/api/v1/pods", 500, times=3, match=lambda r: r.watch)
    start = time.monotonic()
    fake.drop_watches()
    wait_for(lambda: cache.stats["Pod"].consecutive_errors == 3)
    wait_for(lambda: cache.stats["Pod"].errors == 3 and fake.open_watches("/api/v1/pods") == 1)
    # Three failures: waits of at least 0.01 + 0.02 + 0.04 s (backoff 0.02 s doubling, jitter >= 1/2).
    assert time.monotonic() - start >= 0.07
    assert (cache.stats["Pod"].lists, cache.stats["Pod"].relists) == (1, 0)
    pod = a_pod(fake)
    fake.delete_object("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    wait_for(lambda: find(cache, "Pod", pod["metadata"]["name"]) is None)
    wait_for(lambda: cache.stats["Pod"].consecutive_errors == 0)
    # A malformed event line: an error, then a watch again from the same place.
    fake.fail("/api/v1/nodes", 200, times=1, match=lambda r: r.watch, body=b'{"type": "ADDED"\n')
    fake.drop_watches()
    wait_for(lambda: cache.stats["Node"].errors == 1 and fake.open_watches("/api/v1/nodes") == 1)
    assert cache.stats["Node"].relists == 0


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
