"""The evaluation cache on the live source: snapshots of the watch cache (fed by the loopback
fake API server over real HTTP) carry revision numbers, and an evaluation with an
EvaluationCache equals a full one at every step while pods move, come and go, nodes are
tainted and cordoned, and a PDB's allowance changes; a relist starts a new source."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.kube_api import FakeKubeAPI
from waiting import wait_for

from scaler.config import ScalerConfig
from scaler.engine import Evaluation, evaluate
from scaler.simulator.cache import EvaluationCache
from scaler.sources.files import load_objects, load_snapshot
from scaler.sources.watch import WATCHED_CALLS, WatchCache, snapshot_from_cache

EXAMPLE = Path(__file__).resolve().parents[1] / "scaler" / "examples" / "bitbrains-gke-day1"
CFG = ScalerConfig()


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    """The bundled example cut to its first 12 nodes and their pods (and metrics)."""
    every = list(load_objects([EXAMPLE]))
    nodes = sorted(o["metadata"]["name"] for o in every if o["kind"] == "Node")[:12]
    keep_nodes = set(nodes)
    pods = [o for o in every if o["kind"] == "Pod" and o["spec"].get("nodeName") in keep_nodes]
    keep = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}
    out = []
    for o in every:
        kind, meta = o["kind"], o["metadata"]
        if kind in ("Node", "NodeMetrics") and meta["name"] not in keep_nodes:
            continue
        if kind in ("Pod", "PodMetrics") and (meta.get("namespace"), meta["name"]) not in keep:
            continue
        out.append(o)
    return out


@pytest.fixture
def fake(objects: list[dict[str, Any]], no_proxy: None) -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI(bookmark_interval=0.1) as server:
        server.load_objects(objects)
        yield server


@pytest.fixture
def cache(api: Any, fake: FakeKubeAPI) -> Iterator[WatchCache]:
    c = WatchCache(api, backoff_initial=0.02, backoff_max=0.2, page_size=50)
    c.start()
    assert c.wait_synced(60), [k for k, e in c._synced.items() if not e.is_set()]
    wait_for(lambda: fake.open_watches() == len(WATCHED_CALLS))
    yield c
    c.stop()


def _same(full: Evaluation, reused: Evaluation) -> None:
    assert reused.nodes == full.nodes
    assert reused.held == full.held


def _seen(cache: WatchCache) -> int:
    """Watch events and complete LISTs the cache has taken in so far."""
    return sum(s.events + s.lists for s in cache.stats.values())


def _change(rng: random.Random, fake: FakeKubeAPI) -> None:
    """One random change of the cluster, through the fake API server."""
    pods = [p for p in fake.objects("Pod") if p["spec"].get("nodeName")]
    nodes = fake.objects("Node")
    what = rng.choice(["move", "move", "delete", "add", "taint", "cordon", "pdb"])
    if what == "move" and pods:
        pod = rng.choice(pods)
        dest = rng.choice(nodes)["metadata"]["name"]
        fake.put_object({**pod, "spec": {**pod["spec"], "nodeName": dest}})
    elif what == "delete" and pods:
        pod = rng.choice(pods)
        fake.delete_object("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    elif what == "add" and pods:
        pod = rng.choice(pods)
        n = rng.randrange(10**6)
        fake.put_object({**pod, "metadata": {**pod["metadata"], "name": f"new-{n}", "uid": f"new-{n}"}})
    elif what in ("taint", "cordon"):
        node = rng.choice(nodes)
        spec = dict(node.get("spec", {}))
        if what == "taint":
            spec["taints"] = [
                *spec.get("taints", []),
                {"key": f"t{rng.randrange(99)}", "effect": "NoSchedule"},
            ]
        else:
            spec["unschedulable"] = not spec.get("unschedulable", False)
        fake.put_object({**node, "spec": spec})
    else:
        pdbs = fake.objects("PodDisruptionBudget")
        if pdbs:
            pdb = rng.choice(pdbs)
            status = {**pdb.get("status", {}), "disruptionsAllowed": rng.randrange(3)}
            fake.put_object({**pdb, "status": status})


@pytest.mark.parametrize("seed", [1, 2])
def test_incremental_evaluation_equals_a_full_one_on_the_watch_cache(
    seed: int, cache: WatchCache, fake: FakeKubeAPI, api: Any, objects: list[dict[str, Any]]
) -> None:
    rng = random.Random(seed)
    now = load_snapshot([EXAMPLE]).now
    ec = EvaluationCache()
    first = snapshot_from_cache(cache, api, now)
    assert first.revisions is not None and first.revisions.describes(first)
    _same(evaluate(first, CFG), evaluate(first, CFG, cache=ec))
    sources = {first.revisions.source}
    for step in range(10):
        events = _seen(cache)
        if step == 6:
            fake.expire_history(notify=True)  # the watches end with 410: the cache lists again
            wait_for(lambda: sum(s.relists for s in cache.stats.values()) > 0)
            # relisted and watching again: a change made while a kind relists shows as no event
            wait_for(lambda: not cache.stale_kinds() and fake.open_watches() == len(WATCHED_CALLS))
        else:
            _change(rng, fake)
            wait_for(lambda e=events: _seen(cache) > e)  # type: ignore[misc]
        snap = snapshot_from_cache(cache, api, now + 10 * step)
        assert snap.revisions is not None
        sources.add(snap.revisions.source)
        _same(evaluate(snap, CFG), evaluate(snap, CFG, cache=ec))
    assert ec.hits > 0  # the cache answered checks
    assert len(sources) >= 2  # the relist started a new source
