"""Live source, snapshot writer and the loopback fake API server: all over real HTTP."""

from __future__ import annotations

import json
import logging
import math
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes.kube_api import FakeKubeAPI

from scaler.config import ScalerConfig
from scaler.engine import evaluate
from scaler.model.snapshot import ClusterSnapshot, build_snapshot
from scaler.reasons import UnremovableReason
from scaler.sources.files import load_objects, load_snapshot
from scaler.sources.kube import (
    LISTED_WORKLOAD_KINDS,
    READ_CALLS,
    ClusterUnreachable,
    LiveSourceError,
    fetch_objects,
    load_live_snapshot,
    make_api_client,
)
from scaler.sources.writer import write_snapshot

EXAMPLE = Path(__file__).resolve().parents[1] / "scaler" / "examples" / "bitbrains-gke-day1"
FETCHED_KINDS = {c.kind for c in READ_CALLS}
PAGE = 100


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace") or "", meta["name"])


@pytest.fixture(scope="module")
def example_objects() -> list[dict[str, Any]]:
    return list(load_objects([EXAMPLE]))


@pytest.fixture(scope="module")
def file_snapshot() -> ClusterSnapshot:
    return load_snapshot([EXAMPLE])


@pytest.fixture(scope="module")
def loaded_fake(example_objects: list[dict[str, Any]]) -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as fake:
        fake.load_objects(example_objects)
        yield fake


@pytest.fixture
def fake(loaded_fake: FakeKubeAPI, no_proxy: None) -> FakeKubeAPI:
    loaded_fake.reset_faults()
    loaded_fake.requests.clear()
    return loaded_fake


@pytest.fixture(scope="module")
def fetched(loaded_fake: FakeKubeAPI, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    loaded_fake.requests.clear()
    client: Any = make_api_client(str(loaded_fake.write_kubeconfig(tmp_path_factory.mktemp("kc") / "config")))
    try:
        return fetch_objects(client, page_size=PAGE)
    finally:
        client.close()


# -- fetch -----------------------------------------------------------------------------------------


def test_fetch_returns_the_example_objects(
    example_objects: list[dict[str, Any]], fetched: list[dict[str, Any]]
) -> None:
    expected = [o for o in example_objects if o["kind"] in FETCHED_KINDS]
    assert Counter(o["kind"] for o in fetched) == Counter(o["kind"] for o in expected)
    assert sorted(map(key, fetched)) == sorted(map(key, expected))
    assert all(o.get("kind") and o.get("apiVersion") for o in fetched)
    by_key = {key(o): o for o in fetched}
    for kind in ("Node", "Pod", "PodDisruptionBudget", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"):
        for original in [o for o in expected if o["kind"] == kind][:3]:
            assert by_key[key(original)] == original
    for kind in ("NodeMetrics", "PodMetrics"):
        original = next(o for o in expected if o["kind"] == kind)
        got = by_key[key(original)]
        assert got["apiVersion"] == "metrics.k8s.io/v1beta1"
        assert {k: v for k, v in got.items() if k != "apiVersion"} == original


def test_request_pattern(
    loaded_fake: FakeKubeAPI, example_objects: list[dict[str, Any]], fetched: list[dict[str, Any]]
) -> None:
    requests = list(loaded_fake.requests)
    assert {r.path for r in requests} == {c.path for c in READ_CALLS}  # nothing per node or pod
    assert all(r.method == "GET" for r in requests)

    for path in ("/apis/metrics.k8s.io/v1beta1/nodes", "/apis/metrics.k8s.io/v1beta1/pods"):
        (only,) = [r for r in requests if r.path == path]
        assert "limit" not in only.query and "continue" not in only.query

    n_pods = sum(o["kind"] == "Pod" for o in example_objects)
    pod_requests = [r for r in requests if r.path == "/api/v1/pods"]
    assert len(pod_requests) == math.ceil(n_pods / PAGE)
    assert all(r.query.get("limit") == str(PAGE) for r in pod_requests)
    assert "continue" not in pod_requests[0].query
    # Each continue token is the one the previous page answered: walk the pages independently.
    tokens = []
    url = f"{loaded_fake.url}/api/v1/pods?limit={PAGE}"
    while True:
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {loaded_fake.token}"})
        with urllib.request.urlopen(req) as resp:
            token = json.load(resp)["metadata"].get("continue")
        if not token:
            break
        tokens.append(token)
        url = f"{loaded_fake.url}/api/v1/pods?limit={PAGE}&continue={token}"
    assert [r.query["continue"] for r in pod_requests[1:]] == tokens

    counts = Counter(c.kind for c in READ_CALLS)
    assert all(v == 1 for v in counts.values())
    for call in READ_CALLS:
        n = sum(o["kind"] == call.kind for o in example_objects)
        expected = 1 if not call.paginated else max(1, math.ceil(n / PAGE))
        assert len([r for r in requests if r.path == call.path]) == expected, call


def test_live_snapshot_equals_file_snapshot(
    api: Any, file_snapshot: ClusterSnapshot, example_objects: list[dict[str, Any]]
) -> None:
    now = file_snapshot.metrics_time()
    assert now is not None
    live = load_live_snapshot(api, now)
    objects = fetch_objects(api)
    assert live.now == file_snapshot.now == now
    assert live.nodes == file_snapshot.nodes
    assert live.pods == file_snapshot.pods
    assert live.pods_by_node == file_snapshot.pods_by_node
    assert live.pdbs == file_snapshot.pdbs
    assert live.node_metrics == file_snapshot.node_metrics
    assert live.pod_metrics == file_snapshot.pod_metrics
    assert (live.pvs, live.pvcs, live.has_pvs) == (file_snapshot.pvs, file_snapshot.pvcs, False)
    # Deployments are not listed (pods are owned by their ReplicaSets): everything else matches.
    assert live.controllers == {k: v for k, v in file_snapshot.controllers.items() if k[0] != "Deployment"}
    # Every listed controller kind counts, even one the cluster has none of.
    assert live.workload_kinds == LISTED_WORKLOAD_KINDS
    assert "ReplicationController" in live.workload_kinds and live.has_workloads
    assert len(objects) == sum(o["kind"] in FETCHED_KINDS for o in example_objects)


# -- writer ----------------------------------------------------------------------------------------


def test_write_snapshot_round_trip(fetched: list[dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "snap" / "day1"
    written = write_snapshot(fetched, out)
    assert [p.name for p in written] == [
        "nodes.json",
        "pods.json",
        "pdbs.json",
        "workloads.json",
        "node-metrics.json",
        "pod-metrics.json",
    ]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written)
    for path in written:
        doc = json.loads(path.read_text())
        assert doc["metadata"] == {"resourceVersion": ""}
        if path.name.endswith("metrics.json"):
            assert doc["apiVersion"] == "metrics.k8s.io/v1beta1"
            assert doc["kind"] == {"node-metrics.json": "NodeMetricsList"}.get(path.name, "PodMetricsList")
            assert all("kind" not in i and "apiVersion" not in i for i in doc["items"])
        else:
            assert (doc["apiVersion"], doc["kind"]) == ("v1", "List")
            assert all(i["kind"] and i["apiVersion"] for i in doc["items"])
    now = 1_800_000_000.0
    assert load_snapshot([out], now=now) == build_snapshot(fetched, now)
    assert load_snapshot([out]) == build_snapshot(fetched)

    with pytest.raises(ValueError, match=str(out)):
        write_snapshot(fetched, out)
    (out / "volumes.json").write_text("{}")  # stale from an earlier write: removed on overwrite
    assert write_snapshot(fetched, out, overwrite=True) == written
    assert not (out / "volumes.json").exists()
    with pytest.raises(ValueError, match="not a directory"):
        write_snapshot(fetched, out / "nodes.json")
    with pytest.raises(ValueError, match="unsupported kind 'Widget'"):
        write_snapshot([{"kind": "Widget", "metadata": {"name": "w"}}], tmp_path / "other")


def test_volumes_are_fetched_and_written(example_objects: list[dict[str, Any]], tmp_path: Path) -> None:
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1", "labels": {"topology.kubernetes.io/zone": "europe-west1-b"}},
        "spec": {"capacity": {"storage": "10Gi"}},
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-0", "namespace": "catalog"},
        "spec": {"volumeName": "pv-1"},
    }
    with FakeKubeAPI() as fake:
        fake.load_objects([*example_objects, pv, pvc])
        client: Any = make_api_client(str(fake.write_kubeconfig(tmp_path / "kc")))
        try:
            snap = load_live_snapshot(client, 1_800_000_000.0)
            objects = fetch_objects(client)
        finally:
            client.close()
    assert snap.has_pvs and set(snap.pvs) == {"pv-1"} and set(snap.pvcs) == {("catalog", "data-0")}
    written = write_snapshot(objects, tmp_path / "out")
    assert "volumes.json" in [p.name for p in written]
    reloaded = load_snapshot([tmp_path / "out"], now=snap.now)
    # Files cannot say which controller kinds were listed: only the kinds present count there.
    assert reloaded.workload_kinds == snap.workload_kinds - {"ReplicationController"}
    assert replace(reloaded, workload_kinds=snap.workload_kinds) == snap


def test_namespaces_are_fetched_and_written(example_objects: list[dict[str, Any]], tmp_path: Path) -> None:
    """Namespace labels are read (pod affinity's namespaceSelector), and written to and read from
    a snapshot directory."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "catalog", "labels": {"team": "a"}}}
    with FakeKubeAPI() as fake:
        fake.load_objects([*example_objects, ns])
        client: Any = make_api_client(str(fake.write_kubeconfig(tmp_path / "kc")))
        try:
            snap = load_live_snapshot(client, 1_800_000_000.0)
            assert len(fake.requests_to("/api/v1/namespaces")) == 1
            objects = fetch_objects(client)  # the plain objects, for the writer
        finally:
            client.close()
    assert snap.namespace_labels == {"catalog": {"team": "a"}}
    written = write_snapshot(objects, tmp_path / "out")
    assert "namespaces.json" in [p.name for p in written]
    assert load_snapshot([tmp_path / "out"], now=snap.now).namespaces == snap.namespaces


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [404, 503])
def test_missing_metrics_api(fake: FakeKubeAPI, api: Any, status: int) -> None:
    fake.fail("/apis/metrics.k8s.io", status)
    with pytest.raises(LiveSourceError, match=rf"metrics\.k8s\.io.*HTTP {status}") as err:
        fetch_objects(api)
    assert "\n" not in str(err.value)


def test_optional_pv_forbidden_is_skipped(
    fake: FakeKubeAPI, api: Any, caplog: pytest.LogCaptureFixture, example_objects: list[dict[str, Any]]
) -> None:
    fake.fail("/api/v1/persistentvolumes", 403)
    with caplog.at_level(logging.WARNING, logger="scaler.sources.kube"):
        objects = fetch_objects(api)
    assert not any(o["kind"] == "PersistentVolume" for o in objects)
    assert sum(o["kind"] == "Pod" for o in objects) == sum(o["kind"] == "Pod" for o in example_objects)
    assert any("persistentvolumes" in r.getMessage() and "403" in r.getMessage() for r in caplog.records)


def test_server_error_on_pods(fake: FakeKubeAPI, api: Any) -> None:
    fake.fail("/api/v1/pods", 500, times=1)
    with pytest.raises(LiveSourceError, match=r"pods.*500") as err:
        fetch_objects(api)
    assert "/api/v1/pods" in str(err.value)
    assert len(fetch_objects(api, page_size=PAGE)) > 0  # the fault was one-shot


def test_malformed_json(fake: FakeKubeAPI, api: Any) -> None:
    fake.fail("/apis/policy/v1/poddisruptionbudgets", 200, body=b"<html>proxy error</html>")
    with pytest.raises(LiveSourceError, match=r"poddisruptionbudgets\.policy.*malformed JSON"):
        fetch_objects(api)


def test_a_malformed_object_is_left_out_and_its_node_is_neither_candidate_nor_destination(
    fake: FakeKubeAPI, api: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """One pod that does not decode does not fail the pod LIST: it is left out with a warning
    naming it, its node is ``UnreadableObject`` (neither candidate nor destination), and every
    other node is decided as from a clean LIST. A malformed metrics item is left out too."""
    clean = load_live_snapshot(api, 1_800_000_000.0)
    pod = next(p for p in fake.objects("Pod") if p["spec"].get("nodeName"))
    ns, name, node = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["spec"]["nodeName"]
    fake.put_object(
        {
            **pod,
            "spec": {
                **pod["spec"],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}],
            },
        }
    )
    metric = next(m for m in fake.objects("NodeMetrics") if m["metadata"]["name"] != node)
    fake.put_object({**metric, "usage": {"cpu": "lots", "memory": "1Ki"}})
    try:
        with caplog.at_level(logging.WARNING, logger="scaler.sources.kube"):
            snap = load_live_snapshot(api, 1_800_000_000.0)
    finally:
        fake.put_object(pod)  # the server is shared by the module's tests
        fake.put_object(metric)
    assert (ns, name) not in {(p.namespace, p.name) for p in snap.pods}
    why = f"cannot read Pod {ns}/{name}: container 'c' resources: invalid quantity 'lots'"
    assert snap.unreadable == {node: why}
    assert metric["metadata"]["name"] not in snap.node_metrics
    warnings = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"Pod {ns}/{name} is left out: ") for m in warnings), warnings
    assert any(m.startswith(f"NodeMetrics {metric['metadata']['name']} is left out: ") for m in warnings), (
        warnings
    )
    verdicts = {r.node.name: r for r in evaluate(snap, ScalerConfig()).nodes}
    assert (verdicts[node].reason, verdicts[node].detail) == (UnremovableReason.UnreadableObject, why)
    assert all(dest != node for r in verdicts.values() for _, dest in r.moves)
    # Every other node: as from the clean LIST, but the one whose metrics were malformed.
    before = {r.node.name: r.reason for r in evaluate(clean, ScalerConfig()).nodes}
    changed = {n for n, r in verdicts.items() if r.reason != before[n]}
    assert changed <= {node, metric["metadata"]["name"]} | {
        n
        for n, r in before.items()
        if r is UnremovableReason.DestinationForMovedPods or r is UnremovableReason.NoReason
    }, changed


def test_the_metrics_lists_are_decoded_in_one_request_each(fake: FakeKubeAPI, api: Any) -> None:
    fake.requests.clear()
    snap = load_live_snapshot(api, 1_800_000_000.0)
    metrics = [r for r in fake.requests if r.path.startswith("/apis/metrics.k8s.io/")]
    assert sorted(r.path for r in metrics) == ["/apis/metrics.k8s.io/v1beta1/nodes", "/apis/metrics.k8s.io/v1beta1/pods"]
    assert len(snap.pod_metrics) == len(fake.objects("PodMetrics"))


def test_expired_continue_token_restarts_the_list(
    fake: FakeKubeAPI, api: Any, example_objects: list[dict[str, Any]]
) -> None:
    fake.fail("/api/v1/pods", 410, times=1, match=lambda r: "continue" in r.query)
    objects = fetch_objects(api, page_size=PAGE)
    n_pods = sum(o["kind"] == "Pod" for o in example_objects)
    assert sum(o["kind"] == "Pod" for o in objects) == n_pods
    assert len(fake.requests_to("/api/v1/pods")) == 2 + math.ceil(n_pods / PAGE)


def test_connection_refused(tmp_path: Path) -> None:
    with FakeKubeAPI() as fake:
        kubeconfig = fake.write_kubeconfig(tmp_path / "kc")
    client: Any = make_api_client(str(kubeconfig))  # the server is gone: nothing listens there now
    try:
        with pytest.raises(ClusterUnreachable, match=r"127\.0\.0\.1"):
            fetch_objects(client)
    finally:
        client.close()


def test_timeout(fake: FakeKubeAPI, api: Any) -> None:
    # Without the 0.1 s client timeout the 1 s delay would only slow the answer down: the read
    # would succeed and raise nothing.
    fake.delay("/api/v1/nodes", 1.0)
    with pytest.raises(ClusterUnreachable):
        fetch_objects(api, timeout_seconds=0.1)


def test_no_config_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(ClusterUnreachable, match="no kubeconfig"):
        make_api_client()
    monkeypatch.delenv("KUBECONFIG")
    with pytest.raises(ClusterUnreachable, match="no kubeconfig"):
        make_api_client()
    with pytest.raises(ClusterUnreachable, match="no such file"):
        make_api_client(str(tmp_path / "nope"))


def test_config_discovery(fake: FakeKubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    fake.write_kubeconfig(tmp_path / ".kube" / "config")
    assert make_api_client().configuration.host == fake.url
    other = fake.write_kubeconfig(tmp_path / "elsewhere.yaml", context="other")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{other}")
    assert make_api_client(context="other").configuration.host == fake.url
    with pytest.raises(ClusterUnreachable, match="nope"):
        make_api_client(str(other), context="nope")


def test_fake_answers_unknown_paths_with_status(fake: FakeKubeAPI) -> None:
    def get(path: str, token: str | None = fake.token) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(fake.url + path, headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    assert get("/api/v1/widgets") == (404, get("/apis/nope/v1/x")[1])
    status, body = get("/api/v1/widgets")
    assert (body["kind"], body["code"], body["reason"]) == ("Status", 404, "NotFound")
    assert get("/api/v1/nodes", token="wrong")[0] == 401
    status, body = get("/api/v1/namespaces/catalog/pods?limit=2")
    assert status == 200 and len(body["items"]) == 2 and "continue" in body["metadata"]
    assert all(i["metadata"]["namespace"] == "catalog" and "kind" not in i for i in body["items"])
    name = body["items"][0]["metadata"]["name"]
    status, body = get(f"/api/v1/namespaces/catalog/pods/{name}")
    assert status == 200 and body["kind"] == "Pod"
    assert get("/api/v1/pods?continue=garbage")[0] == 400


def test_invalid_arguments(api: Any) -> None:
    with pytest.raises(ValueError, match="page_size"):
        fetch_objects(api, page_size=0)
    with pytest.raises(ValueError, match="timeout"):
        fetch_objects(api, timeout_seconds=0)
