"""API objects the live source could not read, and the nodes whose verdict they make unknown.

A snapshot file is strict: one malformed object is an error naming it, and nothing is decided.
The live source (the watch cache and the LISTs of ``scaler dry-run`` against a cluster) reads
from an API server that stores whatever its validation let through, and one object scaler
cannot decode must not blind it to the rest. Such an object becomes an :class:`Unreadable`:
kept out of the snapshot, named, and charged to the nodes it could change the verdict of
(:func:`unreadable_nodes`); those nodes are neither candidates nor destinations, with the
reason ``UnreadableObject`` (:mod:`scaler.eligibility`), and every other node is decided as
usual. A Node that cannot be read stays in the snapshot as a placeholder
(:func:`placeholder_node`): its pods still count in their zone and its pool still counts it,
but it is never placed on nor removed.

Which nodes an unreadable object concerns, by kind (the narrowest set that holds everything
the object could decide):

* a Node: that node;
* a Pod: the node it is bound to (none while it is unbound; every node when even its
  ``spec.nodeName`` cannot be read);
* a workload controller (ReplicaSet, StatefulSet, DaemonSet, ReplicationController, Job): the
  nodes of the pods it controls (their owner reference);
* a PodDisruptionBudget: the nodes of the pods of its namespace (its selector is unknown);
* a PersistentVolumeClaim: the nodes of the pods of its namespace that mount it;
* any other kind (PersistentVolume, Namespace): every node (a volume's zone or a namespace's
  labels can decide a placement anywhere).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scaler.model.records import Node, Pod, Resources

__all__ = ["CONTROLLED_KINDS", "Unreadable", "placeholder_node", "unreadable_nodes"]

CONTROLLED_KINDS = frozenset({"ReplicaSet", "StatefulSet", "DaemonSet", "ReplicationController", "Job"})
"""The workload controller kinds whose unreadable object concerns the nodes of its pods."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """One API object that did not decode into its record.

    Attributes:
        kind, namespace, name: the object (``namespace`` ``""`` for a cluster-scoped kind).
        message: what is wrong, one line naming the object and the field
            (``Node n1: missing required field 'status.allocatable'``).
        uid: ``metadata.uid`` where it could be read (the warning Event's ``involvedObject``).
        node: a Pod's ``spec.nodeName`` (``""``: unbound); a Node's own name.
        node_known: ``False`` when a Pod's ``spec.nodeName`` could not be read either.
        labels: a Node's labels where they could be read (its node pool and zone).
    """

    kind: str
    namespace: str
    name: str
    message: str
    uid: str = ""
    node: str = ""
    node_known: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        """``(namespace, name)``, as the watch cache keys its records."""
        return self.namespace, self.name

    @property
    def display(self) -> str:
        """``Kind namespace/name`` (``Kind name`` when cluster-scoped)."""
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    @property
    def reason(self) -> str:
        """The one line the nodes it concerns are kept for: ``cannot read Pod shop/web-0: field
        'spec.priority' must be an integer, got 'high'``."""
        prefix = f"{self.display}: "
        detail = self.message[len(prefix) :] if self.message.startswith(prefix) else self.message
        return f"cannot read {self.display}: {detail}"


def placeholder_node(bad: Unreadable) -> Node:
    """The record standing for an unreadable Node in the snapshot: its name, uid and labels (when
    they could be read), no allocatable, not ready. It is never a candidate nor a destination
    (:func:`unreadable_nodes` names it); it keeps its pods in their topology domains and counts
    in its node pool's size."""
    return Node(name=bad.name, allocatable=Resources(), labels=dict(bad.labels), ready=False, uid=bad.uid)


def unreadable_nodes(
    unreadable: Iterable[Unreadable], nodes: Iterable[Node], pods: Iterable[Pod]
) -> dict[str, str]:
    """Node name → why its verdict is unknown (the first unreadable object concerning it, and how
    many more), for the rules of the module docstring.

    Args:
        unreadable: the objects that did not decode.
        nodes: every node of the snapshot (placeholders included).
        pods: every pod of the snapshot.

    Returns:
        The nodes concerned, each with one line (:attr:`Unreadable.reason`, the first by kind
        and name, and how many more).
    """
    bad = list(unreadable)
    if not bad:
        return {}
    node_names = [n.name for n in nodes]
    pod_list = list(pods)
    reasons: dict[str, list[str]] = {}

    def charge(names: Iterable[str], why: str) -> None:
        for name in names:
            reasons.setdefault(name, []).append(why)

    for u in sorted(bad, key=lambda b: (b.kind, b.namespace, b.name)):
        why = u.reason
        if u.kind == "Node":
            charge([u.name], why)
        elif u.kind == "Pod":
            if not u.node_known:
                charge(node_names, why)
            elif u.node:
                charge([u.node], why)
        elif u.kind in CONTROLLED_KINDS:
            charge(
                {
                    p.node_name
                    for p in pod_list
                    if p.node_name and p.namespace == u.namespace and p.controller is not None
                    and p.controller.kind == u.kind and p.controller.name == u.name
                },
                why,
            )  # fmt: skip
        elif u.kind == "PodDisruptionBudget":
            charge({p.node_name for p in pod_list if p.node_name and p.namespace == u.namespace}, why)
        elif u.kind == "PersistentVolumeClaim":
            charge(
                {
                    p.node_name
                    for p in pod_list
                    if p.node_name and p.namespace == u.namespace and any(v.claim_name == u.name for v in p.volumes)
                },
                why,
            )  # fmt: skip
        else:
            charge(node_names, why)
    return {
        name: whys[0] + (f" (and {len(whys) - 1} more unreadable object(s))" if len(whys) > 1 else "")
        for name, whys in reasons.items()
    }
