"""cluster-autoscaler's twelve drainability rules, in CA's order, and ``GetPodsToMove``.

Every pod on a candidate node runs through :data:`RULES` in order; the first rule whose outcome
is not :attr:`DrainOutcome.UNDEFINED` decides the pod (:func:`evaluate_pod`). A blocking pod makes
the whole node unremovable (:func:`get_pods_to_move` stops there).

Sources (paths relative to ``cluster-autoscaler/`` in kubernetes/autoscaler, reference §3):
``simulator/drainability/rules/rules.go`` (``Default``: order and enabling flags), one package
per rule under ``simulator/drainability/rules/``, ``simulator/drainability/status.go``
(outcomes), ``utils/drain/drain.go`` (``BlockingPodReason``, ``IsPodLongTerminating``,
``IsPodTerminal``, ``HasBlockingLocalStorage``) and ``simulator/drain.go`` (``GetPodsToMove``).

Deliberate differences from CA (each documented where it lives):

1. :class:`SystemRule`: an old kube-system pod without a PDB is *not* ``DrainOk``; it falls
   through, so ``safe-to-evict: "false"``, local storage and PDB rules still apply.
2. :func:`get_pods_to_move`: every pod to be evicted is PDB-accounted in order, even those that
   short-circuited the PDB rule; a node needing more disruptions than a PDB allows is blocked
   (CA only marks it "risky").
3. ``safe-to-evict-local-volumes`` entries are whitespace-trimmed (CA splits on ``,`` only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Protocol

from scaler.config import ScalerConfig
from scaler.drain.pdb import RemainingPdbTracker
from scaler.model.records import (
    ANNOTATION_SAFE_TO_EVICT,
    ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES,
    Controller,
    OwnerRef,
    Pod,
)
from scaler.model.snapshot import ClusterSnapshot

__all__ = [
    "LONG_TERMINATING_EXTRA_SECONDS",
    "REPLICATED_KINDS",
    "RULES",
    "BlockingPod",
    "BlockingPodReason",
    "DaemonSetRule",
    "DrainContext",
    "DrainOptions",
    "DrainOutcome",
    "DrainabilityRule",
    "LocalStorageRule",
    "LongTerminatingRule",
    "MirrorRule",
    "NotSafeToEvictRule",
    "OnCompletionRule",
    "PdbRule",
    "PodsToMove",
    "ReplicaCountRule",
    "ReplicatedRule",
    "RuleStatus",
    "SafeToEvictRule",
    "SystemRule",
    "TerminalRule",
    "blocking_local_volumes",
    "evaluate_pod",
    "get_pods_to_move",
    "is_long_terminating",
    "is_terminal",
]

LONG_TERMINATING_EXTRA_SECONDS = 30.0
"""Seconds past deletion + grace period after which a terminating pod is ignored
(CA's ``drain.PodLongTerminatingExtraThreshold``, ``utils/drain/drain.go``)."""

REPLICATED_KINDS = frozenset({"ReplicationController", "Job", "ReplicaSet", "StatefulSet"})
"""Controller kinds whose pods count as replicated when custom-controller pods are skipped
(``replicatedKind`` in ``simulator/drainability/rules/replicated/rule.go``)."""

KUBE_SYSTEM = "kube-system"


class BlockingPodReason(StrEnum):
    """Why a pod blocks the scale-down of its node; values are CA's constant names.

    ``NoReason`` is only the default of non-blocking statuses. ``UnexpectedError`` exists for
    parity with CA (lister errors); no rule here produces it, since the snapshot has no lookup
    errors. Source: ``utils/drain/drain.go`` (``BlockingPodReason``).
    """

    NoReason = "NoReason"
    ControllerNotFound = "ControllerNotFound"
    MinReplicasReached = "MinReplicasReached"
    NotReplicated = "NotReplicated"
    LocalStorageRequested = "LocalStorageRequested"
    NotSafeToEvictAnnotation = "NotSafeToEvictAnnotation"
    UnmovableKubeSystemPod = "UnmovableKubeSystemPod"
    NotEnoughPdb = "NotEnoughPdb"
    UnexpectedError = "UnexpectedError"


class DrainOutcome(Enum):
    """A rule's verdict on one pod (``simulator/drainability/status.go``).

    ``UNDEFINED``: the rule has no opinion, the next one runs (all undefined means drainable).
    ``DRAIN_OK``: the pod is evicted and re-placed (DaemonSet pods are listed apart).
    ``BLOCK_DRAIN``: the node cannot be removed. ``SKIP_DRAIN``: ignored, neither moved nor
    blocking. ``WAIT_FOR_COMPLETION``: not moved; node deletion waits for the pod to finish.
    """

    UNDEFINED = "Undefined"
    DRAIN_OK = "DrainOk"
    BLOCK_DRAIN = "BlockDrain"
    SKIP_DRAIN = "SkipDrain"
    WAIT_FOR_COMPLETION = "WaitForCompletion"


@dataclass(frozen=True, slots=True)
class RuleStatus:
    """The outcome of a rule (or of all rules) for one pod.

    ``reason`` is set only for ``BLOCK_DRAIN``; ``detail`` is a human-readable explanation
    (CA's status error text). Source: ``simulator/drainability/status.go``.
    """

    outcome: DrainOutcome
    reason: BlockingPodReason = BlockingPodReason.NoReason
    detail: str = ""


_UNDEFINED = RuleStatus(DrainOutcome.UNDEFINED)
_DRAIN_OK = RuleStatus(DrainOutcome.DRAIN_OK)
_SKIP = RuleStatus(DrainOutcome.SKIP_DRAIN)
_WAIT = RuleStatus(DrainOutcome.WAIT_FOR_COMPLETION)


def _block(reason: BlockingPodReason, detail: str) -> RuleStatus:
    return RuleStatus(DrainOutcome.BLOCK_DRAIN, reason, detail)


@dataclass(frozen=True, slots=True)
class BlockingPod:
    """The pod that makes a node unremovable, with the reason (``utils/drain/drain.go``)."""

    pod: Pod
    reason: BlockingPodReason
    detail: str = ""


@dataclass(frozen=True, slots=True)
class DrainOptions:
    """Flags that enable or tune the rules (CA's ``options.NodeDeleteOptions``,
    ``simulator/options/nodedelete.go``; flags in ``config/flags/flags.go``).

    Attributes:
        skip_nodes_with_local_storage: enables the LocalStorage rule.
        skip_nodes_with_system_pods: enables the System rule.
        skip_nodes_with_custom_controller_pods: enables the ReplicaCount rule and restricts
            the Replicated rule to :data:`REPLICATED_KINDS`.
        min_replica_count: ReplicaSets/ReplicationControllers with fewer ``spec.replicas``
            block their pods (count of pods).
        blocking_system_pod_disruption_timeout: seconds after creation when a kube-system pod
            without a PDB stops blocking (CA's ``--blocking-system-pod-distruption-timeout``).
    """

    skip_nodes_with_local_storage: bool = True
    skip_nodes_with_system_pods: bool = True
    skip_nodes_with_custom_controller_pods: bool = True
    min_replica_count: int = 0
    blocking_system_pod_disruption_timeout: float = 3600.0

    @classmethod
    def from_config(cls, cfg: ScalerConfig) -> DrainOptions:
        """The options named the same in ``cfg`` (the config already validated them)."""
        return cls(
            skip_nodes_with_local_storage=cfg.skip_nodes_with_local_storage,
            skip_nodes_with_system_pods=cfg.skip_nodes_with_system_pods,
            skip_nodes_with_custom_controller_pods=cfg.skip_nodes_with_custom_controller_pods,
            min_replica_count=cfg.min_replica_count,
            blocking_system_pod_disruption_timeout=cfg.blocking_system_pod_disruption_timeout,
        )


@dataclass(slots=True)
class DrainContext:
    """What the rules read besides the pod (CA's ``drainability.DrainContext``).

    Attributes:
        snapshot: the cluster; rules read ``controllers`` and ``has_workloads`` (CA's listers).
        options: rule flags.
        now: evaluation time, Unix seconds.
        pdb_tracker: remaining PDB allowances; :func:`get_pods_to_move` consumes from it, so
            pass a per-node copy and keep it only if the node's removal is committed.
    """

    snapshot: ClusterSnapshot
    options: DrainOptions
    now: float
    pdb_tracker: RemainingPdbTracker

    @classmethod
    def for_snapshot(
        cls, snapshot: ClusterSnapshot, options: DrainOptions | None = None, now: float | None = None
    ) -> DrainContext:
        """A context with a fresh tracker over ``snapshot.pdbs``; ``now`` defaults to
        ``snapshot.now`` and ``options`` to CA's defaults."""
        return cls(
            snapshot=snapshot,
            options=options if options is not None else DrainOptions(),
            now=snapshot.now if now is None else now,
            pdb_tracker=RemainingPdbTracker(snapshot.pdbs),
        )


@dataclass(frozen=True, slots=True)
class PodsToMove:
    """The result of :func:`get_pods_to_move` for one node (``simulator/drain.go``).

    Attributes:
        pods: pods to evict and re-place on other nodes, in input order.
        daemonset_pods: DaemonSet pods (not re-placed; they die with the node).
        on_completion_pods: ``safe-to-evict: on-completion`` pods the deletion must wait for.
        skipped_pods: mirror and long-terminating pods (ignored).
        blocking: the first blocking pod, or ``None``. When set, the four lists are empty
            (as in CA) and the node is unremovable.
    """

    pods: tuple[Pod, ...] = ()
    daemonset_pods: tuple[Pod, ...] = ()
    on_completion_pods: tuple[Pod, ...] = ()
    skipped_pods: tuple[Pod, ...] = ()
    blocking: BlockingPod | None = None

    @property
    def removable(self) -> bool:
        """True when no pod blocks the node."""
        return self.blocking is None


class DrainabilityRule(Protocol):
    """One drainability rule (CA's ``rules.Rule`` interface, ``rules/rules.go``).

    ``name`` is the CA package name; ``drainable`` returns the rule's verdict and never raises
    for any valid :class:`Pod`.
    """

    @property
    def name(self) -> str:
        """The CA rule package name (``"mirror"``, ``"pdb"``, …)."""
        ...

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """The rule's verdict on ``pod``; ``UNDEFINED`` when it has none."""
        ...


def _safe_to_evict(pod: Pod) -> str | None:
    return pod.annotations.get(ANNOTATION_SAFE_TO_EVICT)


def _api_group(api_version: str) -> str | None:
    """The group of an ``apiVersion`` (``apps/v1`` → ``apps``, ``v1`` → ``""``); ``None`` when
    malformed, like ``schema.ParseGroupVersion`` failing."""
    if api_version.count("/") > 1:
        return None
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def is_long_terminating(pod: Pod, now: float) -> bool:
    """True when ``pod`` has been terminating longer than its grace period plus 30 s.

    ``deletion_ts + termination_grace_seconds + 30 < now`` (all seconds). Source:
    ``utils/drain/drain.go IsPodLongTerminating``.
    """
    if pod.deletion_ts is None:
        return False
    return pod.deletion_ts + pod.termination_grace_seconds + LONG_TERMINATING_EXTRA_SECONDS < now


def is_terminal(pod: Pod) -> bool:
    """True when ``pod`` will never run again: Failed, or Succeeded with restart policy Never or
    OnFailure (a Succeeded pod with ``Always`` is not terminal, as in CA).
    Source: ``utils/drain/drain.go IsPodTerminal``."""
    if pod.phase == "Failed":
        return True
    return pod.phase == "Succeeded" and pod.restart_policy in ("Never", "OnFailure")


def blocking_local_volumes(pod: Pod) -> list[str]:
    """Names of ``pod``'s volumes that count as blocking local storage.

    A volume is local when it is ``hostPath``, or ``emptyDir`` with a medium other than
    ``Memory``; it does not block when listed in the ``safe-to-evict-local-volumes``
    annotation (comma-separated names; we trim spaces around each, CA does not). Source:
    ``utils/drain/drain.go HasBlockingLocalStorage``.
    """
    listed = pod.annotations.get(ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES, "")
    allowed = {v.strip() for v in listed.split(",") if v.strip()}
    out = []
    for vol in pod.volumes:
        local = vol.kind == "hostPath" or (vol.kind == "emptyDir" and vol.medium != "Memory")
        if local and vol.name not in allowed:
            out.append(vol.name)
    return out


class MirrorRule:
    """Rule 1: a mirror pod (static pod's API mirror) is skipped.

    Source: ``simulator/drainability/rules/mirror/rule.go``."""

    name = "mirror"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``SKIP_DRAIN`` for a mirror pod, else ``UNDEFINED``."""
        return _SKIP if pod.is_mirror else _UNDEFINED


class LongTerminatingRule:
    """Rule 2: a pod terminating for longer than grace + 30 s is skipped
    (:func:`is_long_terminating`). Source: ``simulator/drainability/rules/longterminating``."""

    name = "longterminating"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``SKIP_DRAIN`` for a long-terminating pod (at ``ctx.now``), else ``UNDEFINED``."""
        return _SKIP if is_long_terminating(pod, ctx.now) else _UNDEFINED


class ReplicaCountRule:
    """Rule 3: the pod's controller must exist (and have enough replicas).

    Enabled when ``skip_nodes_with_custom_controller_pods`` is on and the snapshot holds
    workload objects (``has_workloads``, standing in for CA's listers), and only for controller
    kinds that were listed (``snapshot.workload_kinds``). Controllers are looked
    up in ``snapshot.controllers`` by ``(kind, pod namespace, name)``. In CA's order:

    * ReplicationController: missing → ``ControllerNotFound``; ``replicas < min_replica_count``
      → ``MinReplicasReached``.
    * DaemonSet pod (:attr:`Pod.is_daemonset`): only for an ``apps`` DaemonSet owner (others
      undefined); missing → ``ControllerNotFound``.
    * Job missing → ``ControllerNotFound``.
    * ReplicaSet: missing → ``ControllerNotFound``; ``replicas < min`` → ``MinReplicasReached``.
    * StatefulSet missing → ``ControllerNotFound``.

    Otherwise (no controller, other kinds, malformed ``apiVersion``) ``UNDEFINED``. An owner
    reference with an empty ``apiVersion`` (hand-built records only; the API requires it) is
    taken to be in the kind's usual group. Source:
    ``simulator/drainability/rules/replicacount/rule.go``.
    """

    name = "replicacount"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """See the class docstring."""
        if not ctx.options.skip_nodes_with_custom_controller_pods or not ctx.snapshot.has_workloads:
            return _UNDEFINED
        ref = pod.controller
        if ref is None:
            return _UNDEFINED
        group = _api_group(ref.api_version)
        if group is None:
            return _UNDEFINED
        if ("DaemonSet" if pod.is_daemonset else ref.kind) not in ctx.snapshot.workload_kinds:
            return _UNDEFINED  # that kind was not listed: nothing is known about its controllers
        minimum = ctx.options.min_replica_count

        def lookup(kind: str) -> Controller | None:
            return ctx.snapshot.controllers.get((kind, pod.namespace, ref.name))

        if ref.kind == "ReplicationController":
            rc = lookup(ref.kind)
            if rc is None:
                return _not_found("replication controller", pod, ref)
            if rc.replicas is not None and rc.replicas < minimum:
                return _too_few("replication controller", pod, rc.replicas, minimum)
        elif pod.is_daemonset:
            if ref.kind != "DaemonSet" or group not in ("apps", ""):
                return _UNDEFINED
            if lookup("DaemonSet") is None:
                return _not_found("daemonset", pod, ref)
        elif ref.kind == "Job":
            if lookup("Job") is None:
                return _not_found("job", pod, ref)
        elif ref.kind == "ReplicaSet":
            rs = lookup("ReplicaSet")
            if rs is None:
                return _not_found("replica set", pod, ref)
            if rs.replicas is not None and rs.replicas < minimum:
                return _too_few("replica set", pod, rs.replicas, minimum)
        elif ref.kind == "StatefulSet" and lookup("StatefulSet") is None:
            return _not_found("statefulset", pod, ref)
        return _UNDEFINED


def _not_found(what: str, pod: Pod, ref: OwnerRef) -> RuleStatus:
    return _block(
        BlockingPodReason.ControllerNotFound,
        f"{what} {pod.namespace}/{ref.name} for {pod.key} is not available",
    )


def _too_few(what: str, pod: Pod, replicas: int, minimum: int) -> RuleStatus:
    return _block(
        BlockingPodReason.MinReplicasReached,
        f"{what} for {pod.key} has too few replicas spec: {replicas} min: {minimum}",
    )


class DaemonSetRule:
    """Rule 4: a DaemonSet pod is drainable (listed apart). It interrupts the later rules.

    Source: ``simulator/drainability/rules/daemonset/rule.go``."""

    name = "daemonset"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``DRAIN_OK`` for a DaemonSet pod (:attr:`Pod.is_daemonset`), else ``UNDEFINED``."""
        return _DRAIN_OK if pod.is_daemonset else _UNDEFINED


class SafeToEvictRule:
    """Rule 5: ``cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`` makes a pod
    drainable, skipping the replicated, system, not-safe, local-storage and PDB rules.

    Source: ``simulator/drainability/rules/safetoevict/rule.go``."""

    name = "safetoevict"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``DRAIN_OK`` when the annotation is exactly ``"true"``, else ``UNDEFINED``."""
        return _DRAIN_OK if _safe_to_evict(pod) == "true" else _UNDEFINED


class TerminalRule:
    """Rule 6: a terminal pod (:func:`is_terminal`) is drainable.

    Source: ``simulator/drainability/rules/terminal/rule.go``."""

    name = "terminal"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``DRAIN_OK`` for a terminal pod, else ``UNDEFINED``."""
        return _DRAIN_OK if is_terminal(pod) else _UNDEFINED


class OnCompletionRule:
    """Rule 7: ``safe-to-evict: "on-completion"`` means the node may go once the pod ends.

    Source: ``simulator/drainability/rules/oncompletion/rule.go``."""

    name = "oncompletion"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``WAIT_FOR_COMPLETION`` when the annotation is ``"on-completion"``, else
        ``UNDEFINED``."""
        return _WAIT if _safe_to_evict(pod) == "on-completion" else _UNDEFINED


class ReplicatedRule:
    """Rule 8: a pod without a controller blocks (``NotReplicated``); with
    ``skip_nodes_with_custom_controller_pods`` on, so does one whose controller kind is not in
    :data:`REPLICATED_KINDS` (DaemonSet pods were already taken by rule 4).

    Source: ``simulator/drainability/rules/replicated/rule.go``."""

    name = "replicated"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``BLOCK_DRAIN``/``NotReplicated`` as described, else ``UNDEFINED``."""
        ref = pod.controller
        if ref is None:
            return _block(BlockingPodReason.NotReplicated, f"{pod.key} is not replicated")
        if ctx.options.skip_nodes_with_custom_controller_pods and ref.kind not in REPLICATED_KINDS:
            return _block(
                BlockingPodReason.NotReplicated,
                f"{pod.key} is not replicated (controller kind {ref.kind!r} is a custom controller)",
            )
        return _UNDEFINED


class SystemRule:
    """Rule 9: a kube-system pod that no PDB covers blocks (``UnmovableKubeSystemPod``).

    Enabled by ``skip_nodes_with_system_pods``. PDB coverage uses ``ctx.pdb_tracker.matching``
    (whatever the remaining allowance). A pod older than ``blocking_system_pod_disruption_timeout``
    (``creation_ts + timeout < now``, seconds) does not block.

    **Deliberate difference from CA:** for that old pod CA (since 1.33) returns ``DrainOk``, which
    skips the NotSafeToEvict, LocalStorage and PDB rules; we return ``UNDEFINED`` so that
    ``safe-to-evict: "false"`` and local storage still block an old system pod.

    Source: ``simulator/drainability/rules/system/rule.go``.
    """

    name = "system"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """See the class docstring."""
        if not ctx.options.skip_nodes_with_system_pods or pod.namespace != KUBE_SYSTEM:
            return _UNDEFINED
        if ctx.pdb_tracker.matching(pod):
            return _UNDEFINED
        created = pod.creation_ts
        if created is not None and created + ctx.options.blocking_system_pod_disruption_timeout < ctx.now:
            return _UNDEFINED
        return _block(
            BlockingPodReason.UnmovableKubeSystemPod,
            f"non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: {pod.name}",
        )


class NotSafeToEvictRule:
    """Rule 10: ``safe-to-evict: "false"`` blocks (``NotSafeToEvictAnnotation``).

    Source: ``simulator/drainability/rules/notsafetoevict/rule.go``."""

    name = "notsafetoevict"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``BLOCK_DRAIN`` when the annotation is exactly ``"false"``, else ``UNDEFINED``."""
        if _safe_to_evict(pod) == "false":
            return _block(
                BlockingPodReason.NotSafeToEvictAnnotation,
                f"pod annotated as not safe to evict present: {pod.key}",
            )
        return _UNDEFINED


class LocalStorageRule:
    """Rule 11: a pod with blocking local storage (:func:`blocking_local_volumes`) blocks
    (``LocalStorageRequested``). Enabled by ``skip_nodes_with_local_storage``.

    Source: ``simulator/drainability/rules/localstorage/rule.go``."""

    name = "localstorage"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``BLOCK_DRAIN`` naming the blocking volumes, else ``UNDEFINED``."""
        if not ctx.options.skip_nodes_with_local_storage:
            return _UNDEFINED
        vols = blocking_local_volumes(pod)
        if vols:
            return _block(
                BlockingPodReason.LocalStorageRequested,
                f"pod with local storage present: {pod.key} (volumes {', '.join(vols)})",
            )
        return _UNDEFINED


class PdbRule:
    """Rule 12: a pod covered by a PDB with remaining allowance below 1 blocks
    (``NotEnoughPdb``), per ``ctx.pdb_tracker.blocking_pdb``.

    Source: ``simulator/drainability/rules/pdb/rule.go``."""

    name = "pdb"

    def drainable(self, ctx: DrainContext, pod: Pod) -> RuleStatus:
        """``BLOCK_DRAIN`` naming the PDB, else ``UNDEFINED``."""
        return _pdb_status(ctx, pod) or _UNDEFINED


def _pdb_status(ctx: DrainContext, pod: Pod) -> RuleStatus | None:
    pdb = ctx.pdb_tracker.blocking_pdb(pod)
    if pdb is None:
        return None
    return _block(
        BlockingPodReason.NotEnoughPdb,
        f"not enough pod disruption budget to move {pod.key}: PDB {pdb.namespace}/{pdb.name} "
        f"has {ctx.pdb_tracker.remaining(pdb)} disruptions allowed remaining",
    )


RULES: tuple[DrainabilityRule, ...] = (
    MirrorRule(),
    LongTerminatingRule(),
    ReplicaCountRule(),
    DaemonSetRule(),
    SafeToEvictRule(),
    TerminalRule(),
    OnCompletionRule(),
    ReplicatedRule(),
    SystemRule(),
    NotSafeToEvictRule(),
    LocalStorageRule(),
    PdbRule(),
)
"""The default rules in CA's order (``rules.Default``, ``simulator/drainability/rules/rules.go``).
Rules CA leaves out when a flag is off are always present here and check the flag themselves."""


def evaluate_pod(ctx: DrainContext, pod: Pod) -> RuleStatus:
    """Run :data:`RULES` in order on ``pod``; the first non-``UNDEFINED`` status wins.

    All ``UNDEFINED`` yields ``DRAIN_OK`` (CA's ``GetPodsToMove`` treats Undefined as DrainOk).
    Does not modify ``ctx``. Source: ``Rules.Drainable`` in ``simulator/drainability/rules/rules.go``.
    """
    for rule in RULES:
        status = rule.drainable(ctx, pod)
        if status.outcome is not DrainOutcome.UNDEFINED:
            return status
    return _DRAIN_OK


def get_pods_to_move(pods: Sequence[Pod], ctx: DrainContext) -> PodsToMove:
    """Classify the pods of one node and find the first blocking pod, if any.

    For each pod in order, :func:`evaluate_pod` decides: ``BLOCK_DRAIN`` stops and returns a
    result with only ``blocking`` set; ``SKIP_DRAIN`` → ``skipped_pods``;
    ``WAIT_FOR_COMPLETION`` → ``on_completion_pods``; ``DRAIN_OK`` → ``daemonset_pods`` for
    DaemonSet pods, else ``pods``.

    PDB accounting, as CA: each pod is checked against the budget left by the nodes removed
    *earlier* in the evaluation (not by its neighbours on this node), and once the node passes,
    its pods are charged to ``ctx.pdb_tracker`` together. Two pods of a PDB allowing one
    disruption on one node therefore do not block it (CA marks such a node "risky",
    ``core/scaledown/pdb/basic.go``; the second eviction is retried until the first replacement
    is healthy). **Deliberate difference from CA:** pods that short-circuit the PDB rule
    (``safe-to-evict: "true"``, terminal) are still checked, because the Eviction API enforces
    PDBs on every eviction whatever the annotations.

    ``ctx.pdb_tracker`` is mutated when the node passes: pass a copy per node and keep it only
    if the node's removal is committed. Source: ``simulator/drain.go GetPodsToMove``.
    """
    to_move: list[Pod] = []
    ds: list[Pod] = []
    waiting: list[Pod] = []
    skipped: list[Pod] = []
    for pod in pods:
        status = evaluate_pod(ctx, pod)
        outcome = status.outcome
        if outcome is DrainOutcome.DRAIN_OK and not pod.is_daemonset:
            pdb_block = _pdb_status(ctx, pod)
            if pdb_block is not None:
                status, outcome = pdb_block, pdb_block.outcome
            else:
                to_move.append(pod)
                continue
        if outcome is DrainOutcome.BLOCK_DRAIN:
            return PodsToMove(blocking=BlockingPod(pod, status.reason, status.detail))
        if outcome is DrainOutcome.SKIP_DRAIN:
            skipped.append(pod)
        elif outcome is DrainOutcome.WAIT_FOR_COMPLETION:
            waiting.append(pod)
        else:
            ds.append(pod)
    ctx.pdb_tracker.remove_pods(to_move)
    return PodsToMove(tuple(to_move), tuple(ds), tuple(waiting), tuple(skipped))
