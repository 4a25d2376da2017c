"""Tests for the drainability rules (scaler.drain.rules) and PDB accounting (scaler.drain.pdb)."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import pytest
from builders import make_controller, make_node, make_pdb, make_pod, owner_ref
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config import ScalerConfig
from scaler.drain.pdb import RemainingPdbTracker
from scaler.drain.rules import (
    RULES,
    BlockingPodReason,
    DrainContext,
    DrainOptions,
    DrainOutcome,
    RuleStatus,
    blocking_local_volumes,
    evaluate_pod,
    get_pods_to_move,
)
from scaler.model.records import (
    ANNOTATION_DAEMONSET_POD,
    ANNOTATION_MIRROR,
    ANNOTATION_SAFE_TO_EVICT,
    ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES,
    Controller,
    LabelSelector,
    Pod,
    PodDisruptionBudget,
    Volume,
)
from scaler.model.snapshot import ClusterSnapshot

NOW = 1_700_000_000.0
RECENT = NOW - 60.0  # a pod created a minute ago
HOUR = 3600.0

S = BlockingPodReason
DO = DrainOutcome

ALL_KINDS = ("ReplicaSet", "ReplicationController", "StatefulSet", "DaemonSet", "Job")


def ctx_for(
    pods: Iterable[Pod] = (),
    pdbs: Iterable[PodDisruptionBudget] = (),
    controllers: Iterable[Controller] = (),
    has_workloads: bool | None = None,
    **options: object,
) -> DrainContext:
    pods = list(pods)
    pdbs = list(pdbs)
    snap = ClusterSnapshot.create(
        now=NOW,
        nodes=[make_node("n1")],
        pods=pods,
        pdbs=pdbs,
        controllers=controllers,
        workload_kinds=None if has_workloads is None else (ALL_KINDS if has_workloads else ()),
    )
    return DrainContext(
        snapshot=snap,
        options=DrainOptions(**options),  # type: ignore[arg-type]
        now=NOW,
        pdb_tracker=RemainingPdbTracker(pdbs),
    )


def status_of(pod: Pod, **kw: object) -> RuleStatus:
    return evaluate_pod(ctx_for([pod], **kw), pod)  # type: ignore[arg-type]


def blocked(status: RuleStatus, reason: BlockingPodReason) -> bool:
    return status.outcome is DO.BLOCK_DRAIN and status.reason is reason


def sys_pod(name: str = "dns", **kw: object) -> Pod:
    kw.setdefault("creation_ts", RECENT)
    return make_pod(name, namespace="kube-system", **kw)  # type: ignore[arg-type]


def ste(value: str) -> dict[str, str]:
    return {ANNOTATION_SAFE_TO_EVICT: value}


HOST = Volume("data", "hostPath")
EMPTY = Volume("scratch", "emptyDir")
MEMORY = Volume("shm", "emptyDir", medium="Memory")


# --- API shape ---------------------------------------------------------------------------------


def test_rule_names_in_ca_order() -> None:
    assert [r.name for r in RULES] == [
        "mirror",
        "longterminating",
        "replicacount",
        "daemonset",
        "safetoevict",
        "terminal",
        "oncompletion",
        "replicated",
        "system",
        "notsafetoevict",
        "localstorage",
        "pdb",
    ]


def test_reason_values_are_names() -> None:
    assert [r.value for r in BlockingPodReason] == [r.name for r in BlockingPodReason]
    assert BlockingPodReason.NoReason == "NoReason"


def test_plain_replicated_pod_is_drainable() -> None:
    st_ = status_of(make_pod("p"))
    assert st_ == RuleStatus(DO.DRAIN_OK)


def test_options_from_config() -> None:
    assert DrainOptions.from_config(ScalerConfig()) == DrainOptions()
    cfg = ScalerConfig(
        skip_nodes_with_local_storage=False,
        skip_nodes_with_system_pods=False,
        skip_nodes_with_custom_controller_pods=False,
        min_replica_count=4,
        blocking_system_pod_disruption_timeout=120.0,
    )
    assert DrainOptions.from_config(cfg) == DrainOptions(False, False, False, 4, 120.0)


def test_context_for_snapshot_defaults() -> None:
    pdb = make_pdb("a", disruptions_allowed=2)
    snap = ClusterSnapshot.create(now=NOW, nodes=[make_node("n1")], pods=[], pdbs=[pdb])
    ctx = DrainContext.for_snapshot(snap)
    assert ctx.now == NOW and ctx.options == DrainOptions()
    assert ctx.pdb_tracker.remaining(pdb) == 2


# --- 1 mirror ----------------------------------------------------------------------------------


def test_mirror_skipped() -> None:
    assert status_of(make_pod("m", annotations={ANNOTATION_MIRROR: "x"})).outcome is DO.SKIP_DRAIN


def test_mirror_with_anything_is_skipped() -> None:
    pod = sys_pod(
        "kube-proxy",
        owner_kind=None,
        annotations={ANNOTATION_MIRROR: "x", **ste("false")},
        volumes=(HOST,),
        labels={"app": "a"},
    )
    st_ = status_of(pod, pdbs=[make_pdb("a", namespace="kube-system", disruptions_allowed=0)])
    assert st_.outcome is DO.SKIP_DRAIN


# --- 2 longterminating -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deleted_ago", "grace", "skipped"),
    [
        (61.0, 30, True),
        (60.0, 30, False),  # exactly at the threshold: not yet (strict <)
        (59.0, 30, False),
        (200.0, 120, True),
        (149.0, 120, False),
    ],
)
def test_long_terminating(deleted_ago: float, grace: int, skipped: bool) -> None:
    # A bare pod would block as NotReplicated unless skipped.
    pod = make_pod("t", owner_kind=None, deletion_ts=NOW - deleted_ago, termination_grace_seconds=grace)
    st_ = status_of(pod)
    assert (st_.outcome is DO.SKIP_DRAIN) is skipped
    if not skipped:
        assert blocked(st_, S.NotReplicated)


def test_not_deleted_is_not_long_terminating() -> None:
    assert status_of(make_pod("t")).outcome is DO.DRAIN_OK


# --- 3 replicacount ----------------------------------------------------------------------------


def test_replicaset_missing_blocks_when_workloads_known() -> None:
    pod = make_pod("p", owner_name="gone")
    st_ = status_of(pod, controllers=[make_controller("ReplicaSet", "other")])
    assert blocked(st_, S.ControllerNotFound)
    assert "gone" in st_.detail


def test_replicaset_present_ok() -> None:
    assert status_of(make_pod("p"), controllers=[make_controller("ReplicaSet", "app")]).outcome is DO.DRAIN_OK


def test_replicacount_not_checked_without_workloads() -> None:
    assert status_of(make_pod("p", owner_name="gone")).outcome is DO.DRAIN_OK
    st_ = status_of(make_pod("p", owner_name="gone"), has_workloads=False)
    assert st_.outcome is DO.DRAIN_OK


def test_replicacount_needs_custom_controller_flag() -> None:
    pod = make_pod("p", owner_name="gone")
    ctrls = [make_controller("ReplicaSet", "other")]
    assert blocked(status_of(pod, controllers=ctrls), S.ControllerNotFound)
    st_ = status_of(pod, controllers=ctrls, skip_nodes_with_custom_controller_pods=False)
    assert st_.outcome is DO.DRAIN_OK


@pytest.mark.parametrize("kind", ["ReplicaSet", "ReplicationController"])
@pytest.mark.parametrize(
    ("replicas", "minimum", "blocks"),
    [(2, 3, True), (3, 3, False), (0, 0, False), (5, 0, False), (None, 3, False)],
)
def test_min_replica_count(kind: str, replicas: int | None, minimum: int, blocks: bool) -> None:
    pod = make_pod("p", owner_kind=kind, owner_name="app")
    st_ = status_of(
        pod, controllers=[make_controller(kind, "app", replicas=replicas)], min_replica_count=minimum
    )
    assert blocked(st_, S.MinReplicasReached) is blocks
    if not blocks:
        assert st_.outcome is DO.DRAIN_OK


def test_min_replica_count_ignored_when_flag_off() -> None:
    pod = make_pod("p")
    st_ = status_of(
        pod,
        controllers=[make_controller("ReplicaSet", "app", replicas=1)],
        min_replica_count=5,
        skip_nodes_with_custom_controller_pods=False,
    )
    assert st_.outcome is DO.DRAIN_OK


@pytest.mark.parametrize("kind", ["ReplicationController", "DaemonSet", "Job", "StatefulSet"])
def test_other_controllers_missing(kind: str) -> None:
    pod = make_pod("p", owner_kind=kind, owner_name="gone")
    ctrls = [make_controller("ReplicaSet", "unrelated")]
    assert blocked(status_of(pod, controllers=ctrls, has_workloads=True), S.ControllerNotFound)
    # A kind that was not listed at all says nothing about its controllers.
    assert status_of(pod, controllers=ctrls).outcome is not DO.BLOCK_DRAIN
    present = [make_controller(kind, "gone")]
    assert status_of(pod, controllers=present).outcome is DO.DRAIN_OK


def test_controller_lookup_is_per_namespace() -> None:
    pod = make_pod("p", namespace="b")
    st_ = status_of(pod, controllers=[make_controller("ReplicaSet", "app", namespace="a")])
    assert blocked(st_, S.ControllerNotFound)


def test_daemonset_of_other_group_not_checked() -> None:
    pod = make_pod("p", controller=owner_ref("DaemonSet", "gone", api_version="extensions/v1beta1"))
    st_ = status_of(pod, controllers=[make_controller("ReplicaSet", "x")])
    assert st_.outcome is DO.DRAIN_OK


def test_replicacount_ignores_other_kinds() -> None:
    # Deployment-owned (unusual) pods pass replicacount but are blocked by replicated.
    pod = make_pod("p", owner_kind="Deployment", owner_name="gone")
    st_ = status_of(pod, controllers=[make_controller("ReplicaSet", "x")])
    assert blocked(st_, S.NotReplicated)


# --- 4 daemonset -------------------------------------------------------------------------------


def test_daemonset_pod_drainable() -> None:
    pod = make_pod("ds", owner_kind="DaemonSet", owner_name="fluentd")
    assert status_of(pod).outcome is DO.DRAIN_OK


def test_daemonset_annotation_pod_drainable() -> None:
    pod = make_pod("ds", owner_kind=None, annotations={ANNOTATION_DAEMONSET_POD: "true"})
    assert status_of(pod).outcome is DO.DRAIN_OK
    assert blocked(status_of(msgspec.structs.replace(pod, annotations={})), S.NotReplicated)


def test_daemonset_before_not_safe_to_evict() -> None:
    pod = sys_pod("ds", owner_kind="DaemonSet", annotations=ste("false"), volumes=(HOST,))
    assert status_of(pod).outcome is DO.DRAIN_OK


# --- 5 safetoevict -----------------------------------------------------------------------------


def test_safe_to_evict_true_on_bare_pod() -> None:
    assert status_of(make_pod("p", owner_kind=None, annotations=ste("true"))).outcome is DO.DRAIN_OK


def test_safe_to_evict_true_on_kube_system_without_pdb() -> None:
    pod = sys_pod(annotations=ste("true"))
    assert status_of(pod).outcome is DO.DRAIN_OK
    assert blocked(status_of(sys_pod()), S.UnmovableKubeSystemPod)


def test_safe_to_evict_true_with_host_path() -> None:
    pod = make_pod("p", annotations=ste("true"), volumes=(HOST,))
    assert status_of(pod).outcome is DO.DRAIN_OK
    assert blocked(status_of(msgspec.structs.replace(pod, annotations={})), S.LocalStorageRequested)


def test_safe_to_evict_true_short_circuits_pdb_rule() -> None:
    pod = make_pod("p", annotations=ste("true"), labels={"app": "a"})
    assert status_of(pod, pdbs=[make_pdb("a", disruptions_allowed=0)]).outcome is DO.DRAIN_OK


def test_safe_to_evict_is_case_sensitive() -> None:
    assert blocked(status_of(make_pod("p", owner_kind=None, annotations=ste("True"))), S.NotReplicated)


# --- 6 terminal --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "policy", "terminal"),
    [
        ("Succeeded", "Never", True),
        ("Failed", "Never", True),
        ("Succeeded", "OnFailure", True),
        ("Failed", "OnFailure", True),
        ("Failed", "Always", True),
        ("Succeeded", "Always", False),
        ("Running", "Never", False),
        ("Pending", "OnFailure", False),
    ],
)
def test_terminal(phase: str, policy: str, terminal: bool) -> None:
    pod = make_pod("p", owner_kind=None, phase=phase, restart_policy=policy)
    st_ = status_of(pod)
    if terminal:
        assert st_.outcome is DO.DRAIN_OK
    else:
        assert blocked(st_, S.NotReplicated)


# --- 7 oncompletion ----------------------------------------------------------------------------


def test_on_completion_waits_even_when_unreplicated() -> None:
    pod = make_pod("job", owner_kind=None, annotations=ste("on-completion"), volumes=(HOST,))
    assert status_of(pod).outcome is DO.WAIT_FOR_COMPLETION


def test_on_completion_finished_pod_is_terminal_first() -> None:
    pod = make_pod("job", annotations=ste("on-completion"), phase="Succeeded", restart_policy="Never")
    assert status_of(pod).outcome is DO.DRAIN_OK


def test_on_completion_goes_to_its_list() -> None:
    pod = make_pod("job", owner_kind="Job", annotations=ste("on-completion"))
    res = get_pods_to_move([pod], ctx_for([pod]))
    assert res.on_completion_pods == (pod,) and res.pods == () and res.blocking is None


# --- 8 replicated ------------------------------------------------------------------------------


def test_bare_pod_not_replicated() -> None:
    st_ = status_of(make_pod("p", owner_kind=None))
    assert blocked(st_, S.NotReplicated)
    # Not even with the custom-controller flag off.
    assert blocked(
        status_of(make_pod("p", owner_kind=None), skip_nodes_with_custom_controller_pods=False),
        S.NotReplicated,
    )


@pytest.mark.parametrize("kind", ["ReplicationController", "Job", "ReplicaSet", "StatefulSet"])
def test_replicated_kinds_pass(kind: str) -> None:
    assert status_of(make_pod("p", owner_kind=kind)).outcome is DO.DRAIN_OK


def test_custom_controller_blocks_only_with_flag() -> None:
    pod = make_pod("p", owner_kind="Rollout", owner_name="canary")
    assert blocked(status_of(pod), S.NotReplicated)
    assert status_of(pod, skip_nodes_with_custom_controller_pods=False).outcome is DO.DRAIN_OK


# --- 9 system ----------------------------------------------------------------------------------


def test_kube_system_without_pdb_blocks() -> None:
    st_ = status_of(sys_pod())
    assert blocked(st_, S.UnmovableKubeSystemPod)


def test_kube_system_with_pdb_ok() -> None:
    pod = sys_pod(labels={"k8s-app": "dns"})
    pdb = make_pdb("dns", namespace="kube-system", match_labels={"k8s-app": "dns"})
    assert status_of(pod, pdbs=[pdb]).outcome is DO.DRAIN_OK


def test_kube_system_pdb_in_other_namespace_does_not_count() -> None:
    pod = sys_pod(labels={"k8s-app": "dns"})
    pdb = make_pdb("dns", namespace="default", match_labels={"k8s-app": "dns"})
    assert blocked(status_of(pod, pdbs=[pdb]), S.UnmovableKubeSystemPod)


def test_kube_system_pdb_exhausted_blocks_on_pdb() -> None:
    pod = sys_pod(labels={"k8s-app": "dns"})
    pdb = make_pdb("dns", namespace="kube-system", match_labels={"k8s-app": "dns"}, disruptions_allowed=0)
    assert blocked(status_of(pod, pdbs=[pdb]), S.NotEnoughPdb)


def test_system_flag_off() -> None:
    assert status_of(sys_pod(), skip_nodes_with_system_pods=False).outcome is DO.DRAIN_OK


def test_system_other_namespace_ok() -> None:
    assert status_of(make_pod("p", namespace="monitoring", creation_ts=RECENT)).outcome is DO.DRAIN_OK


def test_old_system_pod_does_not_block() -> None:
    old = sys_pod(creation_ts=NOW - HOUR - 1)
    assert status_of(old).outcome is DO.DRAIN_OK
    at_limit = sys_pod(creation_ts=NOW - HOUR)  # strict <: still blocking
    assert blocked(status_of(at_limit), S.UnmovableKubeSystemPod)
    # A custom timeout.
    assert (
        status_of(sys_pod(creation_ts=NOW - 121), blocking_system_pod_disruption_timeout=120.0).outcome
        is DO.DRAIN_OK
    )


def test_old_system_pod_still_not_safe_to_evict() -> None:
    """Our deliberate difference: CA would return DrainOk here."""
    pod = sys_pod(creation_ts=NOW - 2 * HOUR, annotations=ste("false"))
    assert blocked(status_of(pod), S.NotSafeToEvictAnnotation)


def test_old_system_pod_still_local_storage() -> None:
    pod = sys_pod(creation_ts=NOW - 2 * HOUR, volumes=(EMPTY,))
    assert blocked(status_of(pod), S.LocalStorageRequested)


def test_system_rule_after_replicated() -> None:
    assert blocked(status_of(sys_pod(owner_kind=None)), S.NotReplicated)


# --- 10 notsafetoevict -------------------------------------------------------------------------


def test_not_safe_to_evict_blocks() -> None:
    st_ = status_of(make_pod("p", annotations=ste("false")))
    assert blocked(st_, S.NotSafeToEvictAnnotation)
    assert "default/p" in st_.detail


def test_other_safe_to_evict_values_ignored() -> None:
    assert status_of(make_pod("p", annotations=ste("no"))).outcome is DO.DRAIN_OK


def test_not_safe_to_evict_before_local_storage() -> None:
    pod = make_pod("p", annotations=ste("false"), volumes=(HOST,))
    assert blocked(status_of(pod), S.NotSafeToEvictAnnotation)


# --- 11 localstorage ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("volume", "blocks"),
    [
        (HOST, True),
        (EMPTY, True),
        (Volume("s", "emptyDir", medium="HugePages"), True),
        (MEMORY, False),
        (Volume("c", "configMap"), False),
        (Volume("d", "persistentVolumeClaim", claim_name="data"), False),
        (Volume("e", "ephemeral"), False),
    ],
)
def test_local_storage(volume: Volume, blocks: bool) -> None:
    pod = make_pod("p", volumes=(volume,))
    st_ = status_of(pod)
    assert blocked(st_, S.LocalStorageRequested) is blocks
    if blocks:
        assert volume.name in st_.detail
    assert status_of(pod, skip_nodes_with_local_storage=False).outcome is DO.DRAIN_OK


def test_local_volumes_annotation_lists_all() -> None:
    pod = make_pod(
        "p",
        volumes=(HOST, EMPTY, MEMORY),
        annotations={ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES: "data, scratch"},
    )
    assert status_of(pod).outcome is DO.DRAIN_OK


def test_local_volumes_annotation_lists_some() -> None:
    pod = make_pod(
        "p", volumes=(HOST, EMPTY), annotations={ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES: "scratch"}
    )
    st_ = status_of(pod)
    assert blocked(st_, S.LocalStorageRequested)
    assert blocking_local_volumes(pod) == ["data"]


def test_local_volumes_annotation_empty_entries() -> None:
    pod = make_pod("p", volumes=(EMPTY,), annotations={ANNOTATION_SAFE_TO_EVICT_LOCAL_VOLUMES: ",,"})
    assert blocked(status_of(pod), S.LocalStorageRequested)


# --- 12 pdb ------------------------------------------------------------------------------------


def test_pdb_zero_allowance_blocks() -> None:
    pod = make_pod("p", labels={"app": "web"})
    st_ = status_of(pod, pdbs=[make_pdb("web", disruptions_allowed=0)])
    assert blocked(st_, S.NotEnoughPdb)
    assert "default/web" in st_.detail


def test_pdb_with_allowance_ok() -> None:
    pod = make_pod("p", labels={"app": "web"})
    assert status_of(pod, pdbs=[make_pdb("web", disruptions_allowed=1)]).outcome is DO.DRAIN_OK


def test_pdb_non_matching_ignored() -> None:
    pod = make_pod("p", labels={"app": "web"})
    pdbs = [
        make_pdb("other", disruptions_allowed=0),
        make_pdb("web", namespace="prod", disruptions_allowed=0),
        make_pdb("null", selector=None, disruptions_allowed=0),
    ]
    assert status_of(pod, pdbs=pdbs).outcome is DO.DRAIN_OK


def test_pdb_empty_selector_matches_namespace() -> None:
    pod = make_pod("p", labels={"app": "web"})
    assert blocked(
        status_of(pod, pdbs=[make_pdb("all", match_labels={}, disruptions_allowed=0)]), S.NotEnoughPdb
    )


def test_pdb_rule_reads_remaining_allowance() -> None:
    pod = make_pod("p", labels={"app": "web"})
    pdb = make_pdb("web", disruptions_allowed=1)
    ctx = ctx_for([pod], pdbs=[pdb])
    assert evaluate_pod(ctx, pod).outcome is DO.DRAIN_OK
    ctx.pdb_tracker.remove_pods([make_pod("q", labels={"app": "web"})])
    assert blocked(evaluate_pod(ctx, pod), S.NotEnoughPdb)


def test_evaluate_pod_does_not_consume() -> None:
    pod = make_pod("p", labels={"app": "web"})
    pdb = make_pdb("web", disruptions_allowed=1)
    ctx = ctx_for([pod], pdbs=[pdb])
    evaluate_pod(ctx, pod)
    assert ctx.pdb_tracker.remaining(pdb) == 1


# --- get_pods_to_move --------------------------------------------------------------------------


def test_get_pods_to_move_classifies() -> None:
    web = make_pod("web")
    ds = make_pod("ds", owner_kind="DaemonSet", owner_name="agent")
    mirror = make_pod("static", owner_kind=None, annotations={ANNOTATION_MIRROR: "x"})
    dying = make_pod("dying", deletion_ts=NOW - 1000)
    job = make_pod("job", owner_kind="Job", annotations=ste("on-completion"))
    done = make_pod("done", owner_kind=None, phase="Succeeded", restart_policy="Never")
    pods = [web, ds, mirror, dying, job, done]
    res = get_pods_to_move(pods, ctx_for(pods))
    assert res.blocking is None and res.removable
    assert res.pods == (web, done)
    assert res.daemonset_pods == (ds,)
    assert res.skipped_pods == (mirror, dying)
    assert res.on_completion_pods == (job,)


def test_get_pods_to_move_stops_at_first_blocker() -> None:
    a = make_pod("a", labels={"app": "web"})
    bare = make_pod("bare", owner_kind=None)
    c = make_pod("c", labels={"app": "web"}, annotations=ste("false"))
    d = make_pod("d", labels={"app": "web"})
    pdb = make_pdb("web", disruptions_allowed=5)
    ctx = ctx_for([a, bare, c, d], pdbs=[pdb])
    res = get_pods_to_move([a, bare, c, d], ctx)
    assert res.blocking is not None
    assert res.blocking.pod == bare and res.blocking.reason is S.NotReplicated
    assert res.blocking.detail
    assert res.pods == () and res.daemonset_pods == () and not res.removable
    # A blocked node charges nothing.
    assert ctx.pdb_tracker.remaining(pdb) == 5


def test_two_pods_under_allowance_one_do_not_block_the_node_as_in_ca() -> None:
    # CA checks each pod against the budget left by earlier nodes, then charges the node's pods
    # together: the second eviction is retried until the first replacement is healthy.
    a = make_pod("a", labels={"app": "web"})
    b = make_pod("b", labels={"app": "web"})
    pdb = make_pdb("web", disruptions_allowed=1)
    ctx = ctx_for([a, b], pdbs=[pdb])
    res = get_pods_to_move([a, b], ctx)
    assert res.blocking is None and res.pods == (a, b)
    assert ctx.pdb_tracker.remaining(pdb) == -1
    # The next node with a pod of that PDB is then blocked.
    c = make_pod("c", labels={"app": "web"}, node_name="n2")
    res2 = get_pods_to_move([c], ctx)
    assert res2.blocking is not None and res2.blocking.reason is S.NotEnoughPdb
    assert "default/web" in res2.blocking.detail


def test_pdb_accounting_applies_to_safe_to_evict_and_terminal() -> None:
    """Our deliberate difference: pods that short-circuit the PDB rule are still accounted."""
    a = make_pod("a", labels={"app": "web"}, annotations=ste("true"), owner_kind=None)
    b = make_pod("b", labels={"app": "web"}, phase="Failed", owner_kind=None)
    pdb0 = make_pdb("web", disruptions_allowed=0)
    for pod in (a, b):
        res = get_pods_to_move([pod], ctx_for([pod], pdbs=[pdb0]))
        assert res.blocking is not None and res.blocking.pod == pod
        assert res.blocking.reason is S.NotEnoughPdb
    # With budget left they pass and are charged.
    pdb = make_pdb("web", disruptions_allowed=1)
    ctx = ctx_for([a, b], pdbs=[pdb])
    assert get_pods_to_move([a, b], ctx).pods == (a, b)
    assert ctx.pdb_tracker.remaining(pdb) == -1


def test_pdb_accounting_consumes_every_matching_pdb() -> None:
    a = make_pod("a", labels={"app": "web", "tier": "front"})
    p1 = make_pdb("web", disruptions_allowed=3)
    p2 = make_pdb("front", match_labels={"tier": "front"}, disruptions_allowed=2)
    ctx = ctx_for([a], pdbs=[p1, p2])
    res = get_pods_to_move([a], ctx)
    assert res.pods == (a,)
    assert ctx.pdb_tracker.remaining(p1) == 2 and ctx.pdb_tracker.remaining(p2) == 1


def test_daemonset_and_waiting_pods_not_accounted() -> None:
    ds = make_pod("ds", owner_kind="DaemonSet", labels={"app": "web"})
    job = make_pod("job", owner_kind="Job", labels={"app": "web"}, annotations=ste("on-completion"))
    pdb = make_pdb("web", disruptions_allowed=0)
    ctx = ctx_for([ds, job], pdbs=[pdb])
    res = get_pods_to_move([ds, job], ctx)
    assert res.blocking is None and res.daemonset_pods == (ds,) and res.on_completion_pods == (job,)
    assert ctx.pdb_tracker.remaining(pdb) == 0


def test_tracker_copy_per_node() -> None:
    """The caller's pattern: a copy per node, kept only if the node is removed."""
    pdb = make_pdb("web", disruptions_allowed=1)
    base = RemainingPdbTracker([pdb])
    n1 = make_pod("a", node="n1", labels={"app": "web"})
    n2 = make_pod("b", node="n2", labels={"app": "web"})
    ctx = ctx_for([n1, n2], pdbs=[pdb])
    ctx.pdb_tracker = base.copy()
    assert get_pods_to_move([n1], ctx).removable
    assert base.remaining(pdb) == 1
    base = ctx.pdb_tracker  # commit node n1
    ctx.pdb_tracker = base.copy()
    res = get_pods_to_move([n2], ctx)
    assert res.blocking is not None and res.blocking.reason is S.NotEnoughPdb


def test_empty_node() -> None:
    assert get_pods_to_move([], ctx_for()) == get_pods_to_move((), ctx_for())
    assert get_pods_to_move([], ctx_for()).removable


# --- RemainingPdbTracker -----------------------------------------------------------------------


def test_tracker_basics() -> None:
    web = make_pdb("web", disruptions_allowed=1)
    other = make_pdb("other", namespace="prod", disruptions_allowed=2)
    t = RemainingPdbTracker([web, other])
    pod = make_pod("p", labels={"app": "web"})
    assert t.matching(pod) == [web]
    assert t.blocking_pdb(pod) is None
    t.remove_pods([pod])
    assert t.remaining(web) == 0 and t.blocking_pdb(pod) == web
    t.remove_pods([pod, pod])
    assert t.remaining(web) == -2  # may go negative
    assert t.remaining(other) == 2
    assert t.pdbs == (web, other)
    assert "default/web=-2" in repr(t)


def test_tracker_unknown_pdb() -> None:
    t = RemainingPdbTracker([])
    with pytest.raises(KeyError, match="default/x"):
        t.remaining(make_pdb("x"))


def test_tracker_duplicate_pdb_replaced() -> None:
    t = RemainingPdbTracker([make_pdb("web", disruptions_allowed=0), make_pdb("web", disruptions_allowed=4)])
    assert t.remaining(make_pdb("web")) == 4
    assert len(t.matching(make_pod("p", labels={"app": "web"}))) == 1


def test_tracker_copy_independence() -> None:
    web = make_pdb("web", disruptions_allowed=2)
    t = RemainingPdbTracker([web])
    c = t.copy()
    pod = make_pod("p", labels={"app": "web"})
    c.remove_pods([pod])
    assert (t.remaining(web), c.remaining(web)) == (2, 1)
    t.remove_pods([pod, pod])
    assert (t.remaining(web), c.remaining(web)) == (0, 1)


APPS = ["a", "b", "c"]
NAMESPACES = ["default", "prod"]

pdb_strategy = st.builds(
    lambda i, ns, app, allowed: PodDisruptionBudget(
        namespace=ns,
        name=f"pdb{i}",
        selector=LabelSelector(match_labels={"app": app}) if app else LabelSelector(),
        disruptions_allowed=allowed,
    ),
    st.integers(0, 5),
    st.sampled_from(NAMESPACES),
    st.sampled_from([*APPS, ""]),
    st.integers(-1, 3),
)
pod_strategy = st.builds(
    lambda ns, app: make_pod(f"p-{app}", namespace=ns, labels={"app": app}),
    st.sampled_from(NAMESPACES),
    st.sampled_from(APPS),
)


@settings(max_examples=200, deadline=None)
@given(
    pdbs=st.lists(pdb_strategy, max_size=6),
    ops=st.lists(st.tuples(st.booleans(), st.lists(pod_strategy, max_size=4)), max_size=8),
)
def test_tracker_property(pdbs: list[PodDisruptionBudget], ops: list[tuple[bool, list[Pod]]]) -> None:
    original = RemainingPdbTracker(pdbs)
    copy = original.copy()
    tracked = original.pdbs
    start = {(p.namespace, p.name): original.remaining(p) for p in tracked}
    for on_copy, pods in ops:
        target, other = (copy, original) if on_copy else (original, copy)
        before_t = [target.remaining(p) for p in tracked]
        before_o = [other.remaining(p) for p in tracked]
        target.remove_pods(pods)
        after_t = [target.remaining(p) for p in tracked]
        # Remaining never increases, and drops by exactly the number of covered pods.
        for pdb, b, a in zip(tracked, before_t, after_t, strict=True):
            assert a == b - sum(1 for pod in pods if pdb.matches(pod))
        # The other tracker is untouched.
        assert [other.remaining(p) for p in tracked] == before_o
        # blocking_pdb agrees with remaining.
        for pod in pods:
            blocking = target.blocking_pdb(pod)
            low = [p for p in target.matching(pod) if target.remaining(p) < 1]
            assert blocking == (low[0] if low else None)
    # A fresh copy of either starts from its current state, never from the initial one.
    assert all(
        original.copy().remaining(p) == original.remaining(p) <= start[(p.namespace, p.name)] for p in tracked
    )
