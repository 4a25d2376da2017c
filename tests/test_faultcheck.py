"""The fault matrix's invariant checker (``tests/faultcheck.py``) on made-up audit events: each
invariant is reported when broken and silent when kept, so a passing matrix case means what it
says. No control plane needed."""

from __future__ import annotations

from faultcheck import NodeState, PodLife, holders, violations
from realk8s import AuditEvent

A = "system:serviceaccount:scaler-system:scaler-a"
B = "system:serviceaccount:scaler-system:scaler-b"
ADMIN = "shared-k8s-admin"


def ev(user: str, verb: str, resource: str, name: str, at: float, *, code: int = 200, sub: str = "",
       ns: str = "", took: float = 0.01, stage: str = "ResponseComplete") -> AuditEvent:  # fmt: skip
    return AuditEvent(user=user, verb=verb, group="coordination.k8s.io" if resource == "leases" else "",
                      resource=resource, subresource=sub, namespace=ns, name=name, code=code, uri="",
                      user_agent="", time=at + took, received=at, stage=stage)  # fmt: skip


def lease(user: str, at: float, code: int = 200) -> AuditEvent:
    return ev(user, "update", "leases", "scaler", at, code=code, ns="scaler-system")


def evict(user: str, pod: str, at: float, code: int = 201) -> AuditEvent:
    return ev(user, "create", "pods", pod, at, code=code, sub="eviction", ns="apps")


class FakeRecorder:
    """What a ClusterRecorder would have seen: node deletions, pod bindings, taints."""

    def __init__(self, deleted: dict[str, NodeState], pods: list[PodLife], taints: list[tuple[str, float]] = ()) -> None:  # type: ignore[assignment]
        self.deleted, self.pod_lives, self.taints = deleted, pods, list(taints)

    def tainted_at(self) -> list[tuple[str, float]]:
        return self.taints

    def deletions(self, name: str) -> list[NodeState]:
        return [self.deleted[name]] if name in self.deleted else []

    def workload_pods_at(self, node: str, rv: int) -> list[str]:
        return sorted(p.name for p in self.pod_lives if p.node == node and p.workload and p.bound_rv <= rv
                      and (p.deleted_rv is None or p.deleted_rv > rv))  # fmt: skip


def test_writes_by_the_holder_within_its_lease_pass() -> None:
    events = [lease(A, 0), evict(A, "p1", 1), lease(A, 2), ev(A, "patch", "nodes", "n1", 3), lease(B, 40),
              evict(B, "p2", 41)]  # fmt: skip
    assert violations(events, [A, B]).violations == []
    assert [u for _, u in holders(events)] == [A, B]


def test_a_write_after_another_replica_took_the_lease_is_reported() -> None:
    events = [lease(A, 0), lease(B, 20), evict(A, "p1", 21), ev(A, "patch", "nodes", "n1", 21.1)]
    found = violations(events, [A, B]).violations
    assert len(found) == 2 and all("without the lease" in v and "holder scaler-b" in v for v in found), found


def test_a_write_on_an_expired_lease_is_reported_and_attempts_count() -> None:
    events = [lease(A, 0), evict(A, "p1", 16, code=429)]
    found = violations(events, [A, B], lease_duration=15).violations
    assert len(found) == 1 and "expired lease" in found[0], found
    assert violations(events, [A, B], leased=False).violations == []
    # leased=None: checked only for the replicas that took part in the election
    assert violations(events, [A, B], leased=None).violations == found
    assert violations([evict(A, "p1", 16)], [A], leased=None).violations == []


def test_a_failed_lease_write_does_not_make_a_holder_and_a_deleted_lease_ends_holding() -> None:
    assert violations([lease(A, 0, code=409), evict(A, "p1", 1)], [A]).violations
    deleted = ev(ADMIN, "delete", "leases", "scaler", 1, ns="scaler-system")
    assert violations([lease(A, 0), deleted, evict(A, "p1", 2)], [A]).violations


def test_a_pod_deleted_rather_than_evicted_is_reported() -> None:
    events = [lease(A, 0), ev(A, "delete", "pods", "p1", 1, ns="apps")]
    found = violations(events, [A]).violations
    assert any("outside the Eviction API" in v for v in found), found


def test_node_deletes_untainted_schedulable_or_holding_workload_pods_are_reported() -> None:
    safe = NodeState(rv=10, event="DELETED", tainted=True, cordoned=True, marks=())
    bare = NodeState(rv=10, event="DELETED", tainted=False, cordoned=False, marks=())
    gap = NodeState(rv=10, event="VANISHED", tainted=True, cordoned=True, marks=())
    pods = [PodLife("apps/web", node="n2", bound_rv=5), PodLife("apps/gone", node="n1", bound_rv=5, deleted_rv=9),
            PodLife("apps/agent", node="n1", bound_rv=5, workload=False)]  # fmt: skip
    rec = FakeRecorder({"n1": safe, "n2": safe, "n3": bare, "n4": gap}, pods)
    events = [lease(A, 0)] + [ev(A, "delete", "nodes", n, 1 + i * 0.1) for i, n in enumerate(("n1", "n2", "n3", "n4"))]
    found = violations(events, [A], rec).violations  # type: ignore[arg-type]
    assert not any("n1" in v for v in found), found
    assert any("n2" in v and "apps/web" in v for v in found), found
    assert any("n3" in v and "untainted and schedulable" in v for v in found), found
    assert any("n4" in v and "watch gap" in v for v in found), found
    assert violations(events, [B], rec).violations == []  # type: ignore[arg-type]  # someone else's deletes


def watch(user: str, started: float, ended: float, code: int = 200) -> list[AuditEvent]:
    """A pods WATCH that streamed from ``started`` to ``ended`` (or was refused at ``started``)."""
    if code != 200:
        return [ev(user, "watch", "pods", "", started, code=code)]
    return [ev(user, "watch", "pods", "", started, stage="ResponseStarted"),
            ev(user, "watch", "pods", "", started, took=ended - started)]  # fmt: skip


def test_taints_evictions_and_deletes_while_a_kind_is_stale_are_reported() -> None:
    """Pods: listed at 0, watched until 5, relisted at 8 (the watch failed: a 410): stale from 5
    to 8. Then a watch refused 429 at 10, a list refused at 11, a list answered at 13: stale from
    10 to 13. What the replica did inside either window (past the tolerance) is reported; what it
    did outside, or at once after it learnt (the request under way), is not."""
    events = [lease(A, 0), ev(A, "list", "pods", "", 0), *watch(A, 1, 5), ev(A, "list", "pods", "", 8),
              *watch(A, 9, 10), *watch(A, 10, 10, code=429), ev(A, "list", "pods", "", 11, code=429),
              ev(A, "list", "pods", "", 13), *watch(A, 14, 20), ev(A, "list", "pods", "", 20)]  # fmt: skip
    events += [evict(A, "p-in-first", 6), evict(A, "p-after", 8.5), evict(A, "p-under-way", 10.2),
               evict(A, "p-in-second", 12), ev(A, "patch", "nodes", "n1", 12.4), ev(A, "delete", "nodes", "n2", 12.6),
               ev(A, "patch", "nodes", "n3", 12.7)]  # fmt: skip
    safe = NodeState(rv=10, event="DELETED", tainted=True, cordoned=True, marks=())
    rec = FakeRecorder({"n2": safe}, [], taints=[("n1", 12.45)])  # n3's patch was a status: no taint seen
    found = violations(sorted(events, key=lambda e: e.received), [A], rec, lease_duration=60).violations  # type: ignore[arg-type]
    assert len(found) == 4, found
    assert all("while pods was stale" in v for v in found), found
    assert [v.split(" by ")[0] for v in found] == [
        "create pods/eviction apps/p-in-first -> 201", "create pods/eviction apps/p-in-second -> 201",
        "taint of node n1", "delete nodes n2 -> 200",
    ], found  # fmt: skip
    assert "(+10.0s to +13.0s)" in found[2], found
    # A watch that ended cleanly and was watched again: fresh all along.
    calm = [lease(A, 0), ev(A, "list", "pods", "", 0), *watch(A, 1, 5), *watch(A, 5, 9), evict(A, "p", 6)]
    assert violations(calm, [A], lease_duration=60).violations == []
