"""The install's least privilege and the snapshot's secrets, on a real kube-apiserver v1.28.4
(``../shared/k8s``, see :mod:`realk8s`; one control plane for the module).

* RBAC, server side: ``scaler run`` with the base's roles (``--cloud-provider kubernetes``:
  a node drained and deleted) and ``scaler run --dry-run`` with the dry-run overlay's, and
  ``kubectl scaler``'s commands with ``deploy/viewer``'s, each as its own ServiceAccount: the
  audit log shows no request denied, and every (group, resource, verb) the roles grant used;
* Pod Security: the API server's own PodSecurity admission (``restricted``, enforced) admits a
  pod from every pod template under ``deploy/``, rejects each relaxation of one, and agrees
  with :func:`pod_security.restricted_violations` on all of them;
* ``scaler snapshot`` of a pod created by ``kubectl apply`` with a password in its env (so the
  server stores it in the pod, in kubectl's last-applied annotation and names it in
  managedFields): the files hold it nowhere, and are 0600 in a 0700 directory.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pod_security import pod_specs, restricted_violations
from realk8s import (
    GI,
    MI,
    ApiError,
    AuditEvent,
    ControlPlane,
    Kubelet,
    MetricsServer,
    running_cluster,
    sa_user,
    scaler_process,
    unavailable,
)
from realk8s import deploy_rbac as rbac
from test_deploy import bound_roles, expand, kubectl, one, rendered
from test_deploy_hardening import kustomizations, render_any
from waiting import wait_for

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "available")

NAMESPACE = "scaler-system"
APPS = "apps"
PSS = "restricted-pods"
BUSY_USAGE = (1000, int(9.6 * GI))  # utilization 0.6 of 4 CPU / 16 GiB
IDLE_USAGE = (120, GI)
SECRET = "hunter2-s3cr3t-PASSWORD"
FAST = [
    "--scale-down-unneeded-time=0s", "--scan-interval=1s", "--node-delete-delay-after-taint=0s",
    "--scale-down-delay-after-add=0s", f"--namespace={NAMESPACE}", "--address=127.0.0.1:0",
]  # fmt: skip
# Every authenticated user may ask what it may do (system:basic-user): not granted by scaler's roles.
ACCESS_REVIEWS = ("authorization.k8s.io", "selfsubjectaccessreviews", "create")


@dataclass
class World:
    cp: ControlPlane
    kubelet: Kubelet
    metrics: MetricsServer
    tmp: Path
    kubeconfigs: dict[str, Path]

    def node(self, name: str, usage: tuple[int, int]) -> str:
        self.cp.add_node(name)
        self.metrics.node_usage[name] = usage
        return name


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("real-hardening")
    with running_cluster(tmp / "control-plane") as (cp, kubelet, metrics):
        cp.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPS}}])
        cp.apply(rbac("base", "scaler"))
        cp.apply(rbac("overlays/dry-run", "scaler-dry-run"))
        cp.apply([d for d in rendered("viewer")])
        cp.apply([
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "viewer", "namespace": NAMESPACE}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "scaler-viewer:viewer"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "scaler-viewer"},
             "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": NAMESPACE}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "scaler-viewer:viewer", "namespace": NAMESPACE},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "scaler-viewer"},
             "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": NAMESPACE}]},
        ])  # fmt: skip
        kubeconfigs = {
            name: cp.service_account_kubeconfig(name, NAMESPACE, tmp / f"{name}.kubeconfig")
            for name in ("scaler", "scaler-dry-run", "viewer")
        }
        yield World(cp, kubelet, metrics, tmp, kubeconfigs)


def used(events: list[AuditEvent]) -> set[tuple[str, str, str]]:
    """(group, resource[/subresource], verb) of every request, the access reviews left out."""
    out = {(e.group, e.resource + (f"/{e.subresource}" if e.subresource else ""), e.verb) for e in events}
    return out - {ACCESS_REVIEWS}


def granted(overlay: str) -> set[tuple[str, str, str]]:
    cluster_roles, roles = bound_roles(rendered(overlay))
    return expand(cluster_roles[0]["rules"]) | expand(roles[0]["rules"])


def denied(events: list[AuditEvent]) -> list[str]:
    return [e.display for e in events if e.code in (401, 403)]


def status_written_twice(cp: ControlPlane, offset: int, user: str) -> bool:
    return any(e.resource == "configmaps" and e.verb == "update" for e in cp.audit(offset, user))


# -- RBAC: enough, and no more ----------------------------------------------------------------------


def test_scaler_run_with_the_base_roles_is_never_denied_and_uses_every_granted_verb(world: World) -> None:
    """Two busy nodes and an underused one whose two ReplicaSet pods move: the underused node
    is tainted, drained through evictions and its Node object deleted (``--cloud-provider
    kubernetes``), with leader election and the status ConfigMap; then SIGTERM."""
    w = world
    busy = [w.node(f"rbac-busy-{i}", BUSY_USAGE) for i in range(2)]
    w.cp.place(lambda: w.cp.deployment("backend", APPS, 2, cpu_millicores=500, memory_bytes=GI), APPS, "backend", 2,
               on=busy)  # fmt: skip
    under = w.node("rbac-under", IDLE_USAGE)
    w.cp.place(lambda: w.cp.deployment("web", APPS, 2), APPS, "web", 2, on=[under])
    user = sa_user("scaler")
    offset = w.cp.audit_offset()
    with scaler_process(w.kubeconfigs["scaler"], [*FAST, "--cloud-provider=kubernetes", "--leader-elect=true"],
                        w.tmp / "base.log") as proc:  # fmt: skip
        wait_for(lambda: w.cp.get("Node", under) is None, 120, "the underused node to be deleted")
        wait_for(lambda: status_written_twice(w.cp, offset, user), 60, "the status ConfigMap updated")
        assert proc.terminate(60) == 0, proc.output
    events = w.cp.audit(offset, user)
    assert denied(events) == []
    grants = granted("base")
    assert used(events) == grants, (
        f"granted, never used: {sorted(grants - used(events))}; used, not granted: {sorted(used(events) - grants)}"
    )
    w.cp.delete_all("Deployment", APPS, "apps/v1")
    w.cp.delete_all("Pod", APPS, grace=0)
    w.cp.delete_all("Node")


def test_the_dry_run_with_its_roles_is_never_denied_and_uses_every_granted_verb(world: World) -> None:
    w = world
    w.node("dry-busy", BUSY_USAGE)
    w.node("dry-empty", (50, 512 * MI))
    user = sa_user("scaler-dry-run")
    offset = w.cp.audit_offset()
    w.cp.delete("Lease", "scaler", NAMESPACE, "coordination.k8s.io/v1")
    w.cp.delete("ConfigMap", "scaler-status", NAMESPACE)
    with scaler_process(w.kubeconfigs["scaler-dry-run"], [*FAST, "--cloud-provider=kubernetes", "--dry-run", "--leader-elect=true"],
                        w.tmp / "dry.log") as proc:  # fmt: skip
        wait_for(lambda: any(e.resource == "events" and e.verb == "create" for e in w.cp.audit(offset, user)), 60,
                 "a ScaleDownDryRun event")  # fmt: skip
        w.node("dry-late", BUSY_USAGE)  # a new node: the status changes, the ConfigMap is updated
        wait_for(lambda: status_written_twice(w.cp, offset, user), 60, "the status ConfigMap updated")
        assert proc.terminate(60) == 0, proc.output
    events = w.cp.audit(offset, user)
    assert denied(events) == []
    grants = granted("overlays/dry-run")
    assert used(events) == grants, (
        f"granted, never used: {sorted(grants - used(events))}; used, not granted: {sorted(used(events) - grants)}"
    )
    assert w.cp.get("Node", "dry-empty") is not None
    w.cp.delete_all("Node")


def test_kubectl_scaler_with_the_viewer_roles_is_never_denied_and_uses_every_granted_verb(world: World) -> None:
    """``scaler dry-run``, ``why`` and ``status`` (what ``kubectl scaler`` runs) and ``scaler
    snapshot``, as a ServiceAccount bound to deploy/viewer's two roles."""
    w = world
    node = w.node("view-0", IDLE_USAGE)
    w.cp.apply([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "scaler-status", "namespace": NAMESPACE},
                 "data": {"status": "time: 2026-11-27T10:42:13Z\nnodes: []\n"}}])  # fmt: skip
    user = sa_user("viewer")
    offset = w.cp.audit_offset()
    kubeconfig = str(w.kubeconfigs["viewer"])
    for argv in (["dry-run", "--kubeconfig", kubeconfig], ["why", node, "--kubeconfig", kubeconfig],
                 ["status", "--kubeconfig", kubeconfig], ["snapshot", "--kubeconfig", kubeconfig, "--out", str(w.tmp / "view")]):  # fmt: skip
        out = subprocess.run([sys.executable, "-m", "scaler.cli", *argv], capture_output=True, text=True, timeout=120,
                             check=False)  # fmt: skip
        assert out.returncode == 0, (argv, out.stderr)
    events = w.cp.audit(offset, user)
    assert denied(events) == []
    roles = rendered("viewer")
    grants = expand(one(roles, "ClusterRole")["rules"]) | expand(one(roles, "Role")["rules"])
    assert used(events) == grants, (
        f"granted, never used: {sorted(grants - used(events))}; used, not granted: {sorted(used(events) - grants)}"
    )
    assert not [e.display for e in events if e.verb not in ("get", "list")], "read-only"
    w.cp.delete_all("Node")


# -- Pod Security: the API server's admission agrees --------------------------------------------------


def as_pod(meta: dict[str, Any], spec: dict[str, Any], name: str) -> dict[str, Any]:
    """A Pod of ``spec`` in the restricted namespace, with what other admission plugins would
    refuse there (a ServiceAccount or priority class it does not have) left out."""
    spec = copy.deepcopy(spec)
    spec.pop("serviceAccountName", None)
    spec.pop("priorityClassName", None)
    metadata = {"name": name, "namespace": PSS, "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {})}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def admitted(cp: ControlPlane, pod: dict[str, Any]) -> tuple[bool, str]:
    try:
        cp.request("POST", f"/api/v1/namespaces/{PSS}/pods", pod, params={"dryRun": "All"})
    except ApiError as e:
        assert e.status == 403 and "violates PodSecurity" in str(e), str(e)
        return False, str(e)
    return True, ""


def test_the_api_servers_pod_security_admission_admits_every_shipped_pod_and_agrees_with_the_check(
    world: World, tmp_path: Path
) -> None:
    cp = world.cp
    cp.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PSS, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}])  # fmt: skip
    shipped = []
    for i, name in enumerate(kustomizations()):
        (tmp_path / str(i)).mkdir()
        for doc in render_any(name, tmp_path / str(i)):
            for path, meta, spec in pod_specs(doc):
                shipped.append((f"{name}: {doc['kind']}/{doc['metadata']['name']} {path}", dict(meta), dict(spec)))
    assert len(shipped) >= 5  # the controller, the self-hosted CA, the RayJob's head, workers, submitter
    for k, (where, meta, spec) in enumerate(shipped):
        ok, why = admitted(cp, as_pod(meta, spec, f"shipped-{k}"))
        assert ok, f"{where}: {why}"
        assert restricted_violations(meta, spec) == [], where
    # Each relaxation of the controller's pod: the admission refuses it, and so does the check.
    # (Not procMount: v1.28 drops the field, its ProcMountType feature gate being off.)
    template = one(rendered("overlays/gke"), "Deployment")["spec"]["template"]
    relaxations = {
        "allowPrivilegeEscalation unset": lambda p, c: c.pop("allowPrivilegeEscalation"),
        "root allowed": lambda p, c: (p["securityContext"].pop("runAsNonRoot"), c.pop("runAsNonRoot")),
        "runAsUser 0": lambda p, c: c.update(runAsUser=0),
        "capabilities kept": lambda p, c: c.update(capabilities={"drop": ["NET_RAW"]}),
        "NET_RAW added": lambda p, c: c.update(capabilities={"drop": ["ALL"], "add": ["NET_RAW"]}),
        "no seccomp profile": lambda p, c: (p["securityContext"].pop("seccompProfile"), c.pop("seccompProfile")),
        "Unconfined seccomp": lambda p, c: c.update(seccompProfile={"type": "Unconfined"}),
        "privileged": lambda p, c: (c.pop("allowPrivilegeEscalation"), c.update(privileged=True)),
        "hostNetwork": lambda p, c: p.update(hostNetwork=True),
        "hostPath volume": lambda p, c: p["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "hostPort": lambda p, c: p["containers"][0]["ports"][0].update(hostPort=8085),
        "bare init container": lambda p, c: p.update(initContainers=[{"name": "init", "image": "x"}]),
        "unsafe sysctl": lambda p, c: p["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
        "SELinux user": lambda p, c: c.update(seLinuxOptions={"user": "system_u"}),
    }
    for k, (what, change) in enumerate(relaxations.items()):
        t = copy.deepcopy(template)
        change(t["spec"], t["spec"]["containers"][0]["securityContext"])
        ok, _ = admitted(cp, as_pod(t["metadata"], t["spec"], f"relaxed-{k}"))
        assert not ok, f"the API server admitted a pod with {what}"
        assert restricted_violations(t["metadata"], t["spec"]), f"the check missed {what}"


# -- scaler snapshot of a pod with a secret in its env -------------------------------------------------


def test_snapshot_of_a_kubectl_applied_pod_with_a_secret_holds_it_nowhere(world: World) -> None:
    w = world
    node = w.node("snap-0", IDLE_USAGE)
    manifest = w.tmp / "pod.json"
    manifest.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db-client", "namespace": APPS},
        "spec": {"nodeName": node, "containers": [{
            "name": "app", "image": "registry.k8s.io/pause:3.9",
            "env": [{"name": "DB_PASSWORD", "value": SECRET},
                    {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"name": "db", "key": "user", "optional": True}}}],
        }]},
    }))  # fmt: skip
    admin = str(w.cp.admin_kubeconfig)
    subprocess.run([kubectl(), "--kubeconfig", admin, "apply", "-f", str(manifest)], check=True, capture_output=True,
                   timeout=60)  # fmt: skip
    served = w.cp.get("Pod", "db-client", APPS) or {}
    assert SECRET in json.dumps(served["metadata"]["annotations"]), "kubectl's last-applied copy holds it"
    assert served["metadata"]["managedFields"]
    os.umask(0o022)
    out, raw = w.tmp / "snapshots" / "snap", w.tmp / "snapshots" / "raw"
    for target, extra in ((out, []), (raw, ["--raw"])):
        proc = subprocess.run([sys.executable, "-m", "scaler.cli", "snapshot", "--kubeconfig", admin, "--out",
                               str(target), *extra], capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    holding = sorted(p.name for p in out.iterdir() if SECRET.encode() in p.read_bytes())
    assert holding == []
    assert sorted(p.name for p in raw.iterdir() if SECRET.encode() in p.read_bytes()) == ["pods.json"]
    for path in out.iterdir():
        assert b"last-applied-configuration" not in path.read_bytes() and b"managedFields" not in path.read_bytes()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    pod = next(p for p in json.loads((out / "pods.json").read_text())["items"] if p["metadata"]["name"] == "db-client")
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": "DB_PASSWORD"},
        {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"name": "db", "key": "user", "optional": True}}},
    ]
    w.cp.delete("Pod", "db-client", APPS, grace=0)
    w.cp.delete_all("Node")
