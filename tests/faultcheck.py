"""Safety invariants of ``scaler run`` replicas, checked on a real kube-apiserver from its audit
log and from a watch of every Node and Pod.

The audit log (Metadata level: who, verb, object, answer, when received and when answered) tells
each replica apart by its ServiceAccount and says what it did; it does not hold objects, so a
:class:`ClusterRecorder` watches Nodes and Pods as the admin for the whole case and keeps every
state with its resourceVersion (one etcd: resourceVersions order all writes). A Node's
``DELETED`` event carries the node as it was when deleted (its taints, its cordon), and the pods
bound to it at that resourceVersion are the pods it held.

:func:`violations` checks, for the given replicas:

* **only evictions**: no pod ``delete``/``deletecollection`` by a replica;
* **fenced writes**: every write of a replica to ``nodes`` or ``pods`` (taint, cordon,
  annotation, verdict, eviction, rollback, node delete; attempts count whatever the answer) was
  received while that replica held the Lease: the last successful write of the Lease answered
  before it was the replica's own, less than ``lease_duration`` before (another replica cannot
  take the Lease over sooner: client-go judges expiry from when it saw the last renewal, which
  is after that answer). Events and the status ConfigMap are not checked;
* **safe deletes**: a node deleted by a replica carried ``ToBeDeletedByClusterAutoscaler`` and
  ``spec.unschedulable`` when deleted, and no workload pod (neither a DaemonSet's, a mirror pod,
  nor a finished one) was bound to it then;
* **a fresh view**: no taint (a node PATCH that put ``ToBeDeletedByClusterAutoscaler``, told by
  the recorder), eviction or node delete of a replica was received while a kind it reads was
  stale for it (:func:`stale_windows`: from a failed read of the kind, a 429 included, or from
  the end of a WATCH that was followed by a LIST rather than another WATCH, a 410 or a broken
  stream, until that LIST was answered), with :data:`STALE_TOLERANCE_SECONDS` for the request
  already under way when the replica learnt it.

:func:`leftovers` checks the end state: no surviving node tainted, cordoned or annotated by
a removal (its verdict annotation, and hot-node relief's soft taint and mark, apart). The module is a library for the real-apiserver suite and
the soak benchmark, not a test.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from realk8s import AuditEvent, ControlPlane, list_and_watch

from scaler.kube.client import READ_CALLS

TAINT = "ToBeDeletedByClusterAutoscaler"  # scaler.model.records.TAINT_TO_BE_DELETED (CA's taint)
STATUS_ANNOTATION = "scaler.io/scale-down-status"  # the verdict: may stay on a node
SCALE_DOWN_MARKS = ("scaler.io/scale-down-", "scaler.io/was-unschedulable")  # a removal's marks (not relief's)
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
FENCED_RESOURCES = frozenset({"nodes", "pods"})
STALE_TOLERANCE_SECONDS = 0.5
"""A taint, eviction or delete received this soon after a read failed was already sent (the
replica learns of the failure when the answer reaches it, not when the server sends it)."""


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node as one watch event showed it."""

    rv: int
    event: str  # ADDED, MODIFIED, DELETED; VANISHED: gone while the watch was re-listing
    tainted: bool
    cordoned: bool
    marks: tuple[str, ...]  # a removal's scaler.io/ annotations (the verdict and relief's apart)
    seen: float = 0.0  # when the recorder received it (Unix seconds)


@dataclass(slots=True)
class PodLife:
    """One pod (by uid): where it was bound, from which resourceVersion, until which."""

    name: str
    node: str = ""
    bound_rv: int = 0
    deleted_rv: int | None = None
    workload: bool = True  # not a DaemonSet's, not a mirror pod, not finished


def _node_state(obj: Mapping[str, Any], event: str) -> NodeState:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    annotations = meta.get("annotations") or {}
    return NodeState(
        rv=int(meta.get("resourceVersion") or 0),
        event=event,
        tainted=any(t.get("key") == TAINT for t in spec.get("taints") or []),
        cordoned=bool(spec.get("unschedulable")),
        marks=tuple(sorted(k for k in annotations if k.startswith(SCALE_DOWN_MARKS) and k != STATUS_ANNOTATION)),
        seen=time.time(),
    )


def _workload(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
        return False
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class ClusterRecorder:
    """Watches Nodes and Pods (as the admin) from :meth:`start` to :meth:`stop` and keeps every
    node state and every pod's binding, by resourceVersion. A watch that breaks (a restarted
    kube-apiserver, 410 Gone) re-lists; what vanished meanwhile is recorded as ``VANISHED``.

    Attributes:
        nodes: node name → its states in order.
        pods: pod uid → :class:`PodLife`.
        errors: watch errors (informational: each is followed by a re-list).
    """

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.nodes: dict[str, list[NodeState]] = {}
        self.pods: dict[str, PodLife] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=("/api/v1/nodes", self._node), name="rec-nodes", daemon=True),
            threading.Thread(target=self._run, args=("/api/v1/pods", self._pod), name="rec-pods", daemon=True),
        ]
        self._synced = [threading.Event(), threading.Event()]

    def __enter__(self) -> ClusterRecorder:
        """Start, and wait until both kinds were listed once."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Stop."""
        self.stop()

    def start(self) -> ClusterRecorder:
        """Start both watches; return once both listed."""
        for t in self._threads:
            t.start()
        for e in self._synced:
            e.wait(30)
        return self

    def stop(self) -> None:
        """Stop watching (within a few seconds)."""
        self._stop.set()
        for t in self._threads:
            t.join(15)

    def _node(self, event: str, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        with self._lock:
            self.nodes.setdefault(name, []).append(_node_state(obj, event))

    def _pod(self, event: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        rv = int(meta.get("resourceVersion") or 0)
        with self._lock:
            life = self.pods.setdefault(uid, PodLife(f"{meta.get('namespace')}/{meta.get('name')}"))
            node = str((obj.get("spec") or {}).get("nodeName") or "")
            if node and not life.node:
                life.node, life.bound_rv = node, rv
            life.workload = _workload(obj)
            if event in ("DELETED", "VANISHED"):
                life.deleted_rv = rv

    def _known(self, path: str) -> set[str]:
        with self._lock:
            if path.endswith("/nodes"):
                return {n for n, states in self.nodes.items() if states[-1].event not in ("DELETED", "VANISHED")}
            return {uid for uid, life in self.pods.items() if life.deleted_rv is None}

    def _relist(self, client: httpx.Client, path: str, handle: Any) -> str:
        r = client.get(path)
        r.raise_for_status()
        doc = r.json()
        rv = str(doc["metadata"]["resourceVersion"])
        seen = set()
        for obj in doc.get("items") or []:
            meta = obj["metadata"]
            seen.add(meta["name"] if path.endswith("/nodes") else meta["uid"])
            handle("MODIFIED", obj)
        for key in self._known(path) - seen:
            gone: dict[str, Any] = {"metadata": {"name": key, "uid": key, "resourceVersion": rv}}
            if path.endswith("/nodes"):
                with self._lock:
                    last = self.nodes[key][-1]
                    self.nodes[key].append(NodeState(int(rv), "VANISHED", last.tainted, last.cordoned, last.marks))
            else:
                handle("VANISHED", gone)
        return rv

    def _run(self, path: str, handle: Any) -> None:
        synced = self._synced[0 if path.endswith("/nodes") else 1]

        def relist(client: httpx.Client) -> str:
            rv = self._relist(client, path, handle)
            synced.set()
            return rv

        list_and_watch(self.cp, path, relist, lambda _client, event, obj: handle(event, obj), self._stop, self.errors,
                       reconnect=True)  # fmt: skip

    # -- questions ------------------------------------------------------------------------------------
    def deletions(self, name: str) -> list[NodeState]:
        """The states in which node ``name`` was deleted (``DELETED``, or ``VANISHED`` in a gap)."""
        with self._lock:
            return [s for s in self.nodes.get(name, []) if s.event in ("DELETED", "VANISHED")]

    def workload_pods_at(self, node: str, rv: int) -> list[str]:
        """Workload pods bound to ``node`` at resourceVersion ``rv``."""
        with self._lock:
            return sorted(
                life.name for life in self.pods.values()
                if life.node == node and life.workload and life.bound_rv <= rv
                and (life.deleted_rv is None or life.deleted_rv > rv)
            )  # fmt: skip

    def tainted_at(self) -> list[tuple[str, float]]:
        """(node, when the recorder saw it) of every transition to tainted
        ``ToBeDeletedByClusterAutoscaler``."""
        out = []
        with self._lock:
            for name, states in self.nodes.items():
                before = False
                for st in states:
                    if st.tainted and not before:
                        out.append((name, st.seen))
                    before = st.tainted
        return out

    def ever(self, node: str, *, tainted: bool = False, cordoned: bool = False) -> bool:
        """Whether ``node`` was ever seen tainted (``tainted``) or cordoned (``cordoned``)."""
        with self._lock:
            states = self.nodes.get(node, [])
            return any((tainted and s.tainted) or (cordoned and s.cordoned) for s in states)


@dataclass
class Report:
    """What :func:`violations` found, and counts for the record."""

    violations: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def __bool__(self) -> bool:
        return bool(self.violations)


def _short(user: str) -> str:
    return user.rsplit(":", 1)[-1] if user else "-"


def lease_writes(events: Iterable[AuditEvent], name: str = "scaler", namespace: str = "scaler-system") -> list[AuditEvent]:
    """Successful writes of the Lease (acquire, renew, release) and its deletions, in the order
    they were answered."""
    out = [
        e for e in events
        if e.resource == "leases" and e.name == name and e.namespace == namespace
        and ((e.verb in ("create", "update", "patch") and e.code in (200, 201)) or (e.verb == "delete" and e.code == 200))
    ]  # fmt: skip
    return sorted(out, key=lambda e: e.time)


def holders(events: Iterable[AuditEvent], name: str = "scaler", namespace: str = "scaler-system") -> list[tuple[float, str]]:
    """(time answered, ServiceAccount) at each change of the Lease's writer (``""``: deleted)."""
    out: list[tuple[float, str]] = []
    for e in lease_writes(events, name, namespace):
        who = "" if e.verb == "delete" else e.user
        if not out or out[-1][1] != who:
            out.append((e.time, who))
    return out


_OPTIONAL_KINDS = frozenset(f"{c.resource}.{c.group}" if c.group else c.resource for c in READ_CALLS if c.optional)
"""The kinds scaler reads that it may find refused (``resource.group``, as :func:`stale_windows` names them)."""


def stale_windows(events: Sequence[AuditEvent], user: str) -> list[tuple[str, float, float]]:
    """``(resource, from, until)`` (Unix seconds) of each time a kind ``user`` caches (its
    cluster-wide LISTs and WATCHes; the metrics API and selector LISTs apart) was stale: from
    the answer of a failed read (any status >= 400: a 429, a 410) or from the end of a WATCH
    whose next read was a LIST (the watch failed: a 410 event, a broken stream), until a LIST
    of it was answered 200 (``until`` infinite when none was). The first LIST (the start) opens
    no window. A LIST of an optional kind (:data:`scaler.kube.client.READ_CALLS`) answered 403
    or 404 closes the window as a 200 does: scaler then knows the kind as empty, not stale (it
    decides without it, conservatively; kube-apiserver answers 403 for a moment after a restart,
    before its RBAC cache is filled)."""
    reads: dict[str, list[AuditEvent]] = {}
    for e in events:
        if e.user != user or e.verb not in ("list", "watch") or e.name or e.group == "metrics.k8s.io":
            continue
        if "fieldSelector" in e.uri or "labelSelector" in e.uri:
            continue
        reads.setdefault(f"{e.resource}.{e.group}" if e.group else e.resource, []).append(e)
    out: list[tuple[str, float, float]] = []
    for resource, evs in reads.items():
        evs.sort(key=lambda e: e.time)
        stale_from: float | None = None
        listed = False
        for i, e in enumerate(evs):
            if e.verb == "list" and e.code in (403, 404) and resource in _OPTIONAL_KINDS:
                if stale_from is not None and listed:
                    out.append((resource, stale_from, e.time))
                stale_from, listed = None, True
            elif e.code >= 400:
                stale_from = e.time if stale_from is None else stale_from
            elif e.verb == "list":
                if stale_from is not None and listed:
                    out.append((resource, stale_from, e.time))
                stale_from, listed = None, True
            elif e.stage == "ResponseComplete" and stale_from is None:
                following = next((x for x in evs[i + 1 :] if x.stage != "ResponseStarted" or x.verb != "watch"), None)
                if following is not None and following.verb == "list" and following.code < 400:
                    stale_from = e.time
        if stale_from is not None:
            out.append((resource, stale_from, float("inf")))
    return sorted(out, key=lambda w: w[1])


def _acts_on_a_stale_view(
    events: Sequence[AuditEvent], users: Iterable[str], recorder: ClusterRecorder | None, t0: float
) -> list[str]:
    """The taints, evictions and node deletes of ``users`` received inside one of their
    :func:`stale_windows` (past :data:`STALE_TOLERANCE_SECONDS`)."""
    found = []
    patches = sorted((e for e in events if e.resource == "nodes" and e.verb == "patch" and not e.subresource),
                     key=lambda e: e.received)  # fmt: skip
    taints = []
    for node, seen in recorder.tainted_at() if recorder is not None else []:
        cause = [p for p in patches if p.name == node and p.received <= seen and p.code == 200]
        if cause:
            taints.append(cause[-1])
    for user in users:
        windows = stale_windows(events, user)
        if not windows:
            continue
        acts = [e for e in events if e.user == user and (
            (e.subresource == "eviction" and e.verb == "create") or (e.resource == "nodes" and e.verb == "delete")
        )] + [t for t in taints if t.user == user]  # fmt: skip
        for act in sorted(acts, key=lambda e: e.received):
            for resource, start, end in windows:
                if start + STALE_TOLERANCE_SECONDS < act.received < end:
                    what = f"taint of node {act.name}" if act.verb == "patch" else act.display
                    found.append(
                        f"{what} by {_short(user)} at +{act.received - t0:.1f}s while {resource} was "
                        f"stale (+{start - t0:.1f}s to +{end - t0:.1f}s)"
                    )
                    break
    return found


def violations(
    events: Sequence[AuditEvent],
    users: Iterable[str],
    recorder: ClusterRecorder | None = None,
    *,
    leased: bool | None = True,
    lease_duration: float = 15.0,
    lease: tuple[str, str] = ("scaler-system", "scaler"),
) -> Report:
    """Check the invariants of the module docstring over ``events`` (the audit log of a case)
    for the replicas' ServiceAccount names ``users`` (``system:serviceaccount:NS:NAME``).

    Args:
        leased: the replicas run with leader election (``False``: the fenced-writes check is
            skipped; ``None``: made for the replicas that wrote the Lease at least once).
        lease_duration: the Lease's ``leaseDurationSeconds`` (seconds).
        lease: (namespace, name) of the Lease.
    """
    who = set(users)
    report = Report()
    t0 = min((e.received for e in events), default=0.0)
    ours = [e for e in events if e.user in who]
    for e in ours:
        if e.resource == "pods" and not e.subresource and e.verb in ("delete", "deletecollection"):
            report.violations.append(f"pod removed outside the Eviction API: {e.display} by {_short(e.user)}")
    writes = sorted(
        (e for e in ours if e.verb in WRITE_VERBS and e.resource in FENCED_RESOURCES), key=lambda e: e.received
    )
    claims = lease_writes(events, lease[1], lease[0])
    electing = who if leased else set()
    if leased is None:  # the replicas that took part in the election
        electing = {c.user for c in claims} & who
    if electing:
        for w in (w for w in writes if w.user in electing):
            last = None
            for c in claims:
                if c.time > w.received:
                    break
                last = c
            at = f"+{w.received - t0:.1f}s"
            if last is None or last.verb == "delete" or last.user != w.user:
                holder = _short(last.user) if last is not None and last.verb != "delete" else "nobody"
                report.violations.append(f"write without the lease at {at}: {w.display} by {_short(w.user)} (holder {holder})")
            elif w.received - last.time > lease_duration:
                report.violations.append(
                    f"write on an expired lease at {at}: {w.display} by {_short(w.user)} "
                    f"(last renewed {w.received - last.time:.1f}s before)"
                )
    for e in writes:
        if e.resource == "nodes" and e.verb == "delete" and e.code == 200 and recorder is not None:
            gone = recorder.deletions(e.name)
            if not gone:
                report.violations.append(f"node {e.name} deleted by {_short(e.user)}: its deletion was not observed")
            for state in gone:
                if state.event == "VANISHED":
                    report.violations.append(f"node {e.name} deleted during a watch gap: its state is unknown")
                    continue
                if not (state.tainted and state.cordoned):
                    report.violations.append(
                        f"node {e.name} deleted by {_short(e.user)} while "
                        f"{'untainted' if not state.tainted else ''}{' and ' if not state.tainted and not state.cordoned else ''}"
                        f"{'schedulable' if not state.cordoned else ''}"
                    )
                pods = recorder.workload_pods_at(e.name, state.rv)
                if pods:
                    report.violations.append(f"node {e.name} deleted by {_short(e.user)} holding workload pods {pods}")
    report.violations += _acts_on_a_stale_view(events, who, recorder, t0)
    for e in ours:
        if e.subresource == "eviction":
            report.counts[f"evictions {e.code}"] += 1
        elif e.resource == "nodes" and e.verb == "delete":
            report.counts[f"node deletes {e.code}"] += 1
        elif e.resource == "nodes" and e.verb == "patch":
            report.counts["node patches"] += 1
        if e.code in (401, 403):
            report.counts["denied"] += 1
    report.counts["lease holder changes"] = max(0, len([h for h in holders(events, lease[1], lease[0]) if h[1]]) - 1)
    return report


def leftovers(cp: ControlPlane, ignore: Iterable[str] = ()) -> list[str]:
    """Surviving nodes (except ``ignore``) still tainted, cordoned or marked by scaler."""
    skip = set(ignore)
    out = []
    for node in cp.list("Node"):
        name = node["metadata"]["name"]
        if name in skip:
            continue
        state = _node_state(node, "NOW")
        if state.tainted or state.cordoned or state.marks:
            out.append(f"node {name} left {'tainted ' if state.tainted else ''}{'cordoned ' if state.cordoned else ''}{list(state.marks)}")
    return out
