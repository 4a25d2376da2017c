"""Everything under deploy/ installs with the least it needs, checked on what kubectl renders.

* every kustomization (and every component, on top of the gke overlay) renders with
  ``kubectl kustomize``; every pod it would run (the controller, the self-hosted
  cluster-autoscaler, the RayJob's head, workers and submitter) meets the "restricted" Pod
  Security Standard (:mod:`pod_security`; the real API server's admission agrees, in
  :mod:`test_real_hardening`);
* no Role or ClusterRole grants more than the calls the code makes: scaler's roles exactly
  :func:`scaler.kube.permissions.required_calls`, ``deploy/viewer``'s exactly
  :data:`scaler.status.VIEWER_CALLS`; the one other role is the upstream cluster-autoscaler's
  own, in ``deploy/self-hosted-ca`` only; a real ``scaler run`` against the loopback fakes uses
  every verb the gke overlay grants;
* NetworkPolicies: scaler's pods admit only metrics scrapers, on the metrics port; the RayJob's
  pods only each other and the KubeRay operator (Jobs API); Ray's token authentication is on;
* Google Cloud IAM: the dry-run acts as its own read-only service account; the install guide's
  IAM condition (a CEL expression, evaluated here) admits the cluster's own MIGs and no other.
"""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path
from typing import Any

import cel
import pytest
import yaml
from pod_security import pod_specs, restricted_violations
from test_deploy import (
    DEPLOY,
    NAMESPACE,
    REPO,
    Rule,
    bound_roles,
    container,
    expand,
    kustomize,
    one,
    rendered,
    required_rules,
    run_scaler,
)

from scaler.cloud.base import DELETE_CALLS, IAM_PERMISSIONS
from scaler.cloud.base import READ_CALLS as CLOUD_READ_CALLS
from scaler.docs import _CALL_PURPOSES, _GOOGLE_PURPOSES, _purpose
from scaler.kube.permissions import required_calls
from scaler.status import VIEWER_CALLS

GUIDE = REPO / "docs" / "getting-started" / "install-gke.md"


def kustomizations() -> list[str]:
    """Every kustomization directory under deploy/ (``Kustomization`` or ``Component``)."""
    return sorted(str(p.parent.relative_to(DEPLOY)) for p in DEPLOY.rglob("kustomization.yaml"))


def is_component(name: str) -> bool:
    return bool(yaml.safe_load((DEPLOY / name / "kustomization.yaml").read_text())["kind"] == "Component")


def render_any(name: str, tmp_path: Path) -> list[dict[str, Any]]:
    """The kustomization ``name`` rendered; a component on top of the base, as a user's overlay
    would add it (the gke overlay holds ``monitoring/gke`` already)."""
    if not is_component(name):
        return rendered(name)
    (tmp_path / "deploy").symlink_to(DEPLOY, target_is_directory=True)
    (tmp_path / "install").mkdir()
    (tmp_path / "install" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - ../deploy/base\ncomponents:\n  - ../deploy/{name}\n"
    )
    return kustomize(tmp_path / "install")


def test_every_kustomization_is_found() -> None:
    names = kustomizations()
    for expected in ("base", "overlays/gke", "overlays/dry-run", "self-hosted-ca", "ray", "viewer",
                     "monitoring", "monitoring/gke", "sizing/small", "sizing/large"):  # fmt: skip
        assert expected in names


# -- Pod Security ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", kustomizations())
def test_every_pod_meets_the_restricted_pod_security_standard(name: str, tmp_path: Path) -> None:
    pods = [(d, path, meta, spec) for d in render_any(name, tmp_path) for path, meta, spec in pod_specs(d)]
    if name not in ("viewer",):
        assert pods, f"{name} renders no pod"
    for d, path, meta, spec in pods:
        assert restricted_violations(meta, spec) == [], f"{name}: {d['kind']}/{d['metadata']['name']} {path}"


def test_the_restricted_check_is_not_vacuous() -> None:
    """Each relaxation of the controller's pod is named by the check."""
    base = one(rendered("overlays/gke"), "Deployment")["spec"]["template"]

    def broken(change: Any) -> list[str]:
        t = copy.deepcopy(base)
        change(t["spec"], t["spec"]["containers"][0]["securityContext"])
        return restricted_violations(t.get("metadata") or {}, t["spec"])

    assert restricted_violations(base["metadata"], base["spec"]) == []
    cases = {
        "allowPrivilegeEscalation": lambda p, c: c.pop("allowPrivilegeEscalation"),
        "runAsNonRoot": lambda p, c: (p["securityContext"].pop("runAsNonRoot"), c.pop("runAsNonRoot")),
        "runAsUser=0": lambda p, c: c.update(runAsUser=0),
        "does not drop ALL": lambda p, c: c.update(capabilities={"drop": ["NET_RAW"]}),
        "adds NET_RAW": lambda p, c: c.update(capabilities={"drop": ["ALL"], "add": ["NET_RAW"]}),
        "seccompProfile": lambda p, c: (p["securityContext"].pop("seccompProfile"), c.pop("seccompProfile")),
        "privileged": lambda p, c: (c.pop("allowPrivilegeEscalation"), c.update(privileged=True)),
        "hostNetwork": lambda p, c: p.update(hostNetwork=True),
        "hostPath": lambda p, c: p["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "hostPort": lambda p, c: p["containers"][0]["ports"][0].update(hostPort=8085),
        "initContainers[0]": lambda p, c: p.update(initContainers=[{"name": "init", "image": "x"}]),
    }
    for needle, change in cases.items():
        found = broken(change)
        assert any(needle in v for v in found), (needle, found)


# -- RBAC: no role grants more than the code calls ---------------------------------------------------


def _scaler_rules(name: str) -> set[Rule]:
    """The calls scaler's roles must grant in kustomization ``name``: the base's (for
    --cloud-provider kubernetes; the components build on it), the dry-run overlay's, else the
    gke overlay's (self-hosted-ca builds on it)."""
    overlay = name if name in ("base", "overlays/dry-run", "overlays/gke", "self-hosted-ca") else "base"
    overlay = "overlays/gke" if overlay == "self-hosted-ca" else overlay
    return required_rules(overlay)


def _viewer_rules() -> set[Rule]:
    return {(c.group, c.resource, c.verb) for c in VIEWER_CALLS}


@pytest.mark.parametrize("name", kustomizations())
def test_no_role_grants_more_than_the_calls_the_code_makes(name: str, tmp_path: Path) -> None:
    docs = render_any(name, tmp_path)
    roles = [d for d in docs if d["kind"] in ("Role", "ClusterRole")]
    granted: dict[str, set[Rule]] = {}
    for role in roles:
        role_name = role["metadata"]["name"]
        rules = role["rules"]
        for rule in rules:
            assert "*" not in {*rule.get("apiGroups", []), *rule.get("resources", []), *rule.get("verbs", [])}, role_name
            assert "nonResourceURLs" not in rule and "aggregationRule" not in role, role_name
        granted[role_name] = granted.get(role_name, set()) | expand(rules)
    for role_name, rules in granted.items():
        if role_name == "scaler":
            expected = _scaler_rules(name)
        elif role_name == "scaler-viewer":
            expected = _viewer_rules()
        else:  # the upstream cluster-autoscaler's own RBAC, beside scaler in GKE's self-hosted mode
            assert name == "self-hosted-ca" and role_name == "cluster-autoscaler", f"{name}: unknown role {role_name}"
            continue
        extra = rules - expected
        assert not extra, f"{name}: {role_name} grants calls the code never makes: {sorted(extra)}"
    if "scaler" in granted:
        assert granted["scaler"] == _scaler_rules(name), f"{name}: scaler's roles miss {_scaler_rules(name) - granted['scaler']}"


def test_viewer_roles_grant_exactly_the_calls_of_kubectl_scaler() -> None:
    docs = rendered("viewer")
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == [("ClusterRole", "scaler-viewer"),
                                                                        ("Role", "scaler-viewer")]  # fmt: skip
    cluster = expand(one(docs, "ClusterRole")["rules"])
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert cluster | expand(role["rules"]) == _viewer_rules()
    assert expand(role["rules"]) == {("", "configmaps", "get")}
    assert role["rules"][0]["resourceNames"] == ["scaler-status"]
    assert not {v for _, _, v in cluster} - {"list"}, "the ClusterRole only lists"
    assert not any(r == "secrets" for _, r, _ in cluster)


def test_a_real_run_uses_every_verb_the_gke_overlay_grants(tmp_path: Path) -> None:
    """Against the loopback fakes: a `scaler run` that drains and deletes a node, and writes its
    status ConfigMap again after that, makes every call the gke overlay's roles grant, and no
    other."""

    def done(c: Any) -> bool:
        updated = any(r.method == "PUT" and "/configmaps/" in r.path for r in list(c.kube.requests))
        return bool(c.gce.deleted_instances) and updated

    _, _, _, seen = run_scaler(tmp_path, "overlays/gke", done)
    cluster_roles, roles = bound_roles(rendered("overlays/gke"))
    granted = expand(cluster_roles[0]["rules"]) | expand(roles[0]["rules"])
    assert seen == granted, f"granted, never used: {sorted(granted - seen)}; used, not granted: {sorted(seen - granted)}"


def test_every_permission_is_documented_with_the_call_that_needs_it() -> None:
    """docs/reference/rbac-iam.md (generated) says why each permission is there."""
    from scaler.cloud.gke import GKEProvider
    from scaler.cloud.kubernetes import KubernetesProvider

    calls = {*required_calls(GKEProvider.kube_calls, dry_run=False), *required_calls(KubernetesProvider.kube_calls, False)}
    for call in calls:
        assert _purpose(call, _CALL_PURPOSES), call
        if call.verb not in ("list", "watch"):
            assert f"{call.verb} {call.display}" in _CALL_PURPOSES, call
    assert set(_GOOGLE_PURPOSES) >= set(IAM_PERMISSIONS)
    page = (REPO / "docs" / "reference" / "rbac-iam.md").read_text()
    for section in ("`scaler run` (`deploy/overlays/gke`)", "`scaler run --dry-run` (`deploy/overlays/dry-run`)",
                    "`kubectl scaler` (`deploy/viewer`)", "Google Cloud IAM"):  # fmt: skip
        assert f"## Kubernetes: {section}" in page or f"## {section}" in page, section


# -- NetworkPolicies -------------------------------------------------------------------------------


def test_scaler_pods_admit_only_metrics_scrapers_on_the_metrics_port() -> None:
    for overlay in ("base", "overlays/gke", "overlays/dry-run"):
        docs = rendered(overlay)
        policy = one(docs, "NetworkPolicy", "scaler")
        labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        (rule,) = policy["spec"]["ingress"]
        assert rule["ports"] == [{"port": "http-metrics", "protocol": "TCP"}]
        assert [p["name"] for p in container(docs)["ports"]] == ["http-metrics"], "scaler listens on nothing else"
        (source,) = rule["from"]
        assert set(source) == {"namespaceSelector"}, "whole namespaces of scrapers, no ipBlock"
        (expr,) = source["namespaceSelector"]["matchExpressions"]
        assert expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "In"
        assert set(expr["values"]) == {"gmp-system", "monitoring"}


def test_the_monitoring_page_patch_adds_a_scraper_namespace(tmp_path: Path) -> None:
    page = (REPO / "docs" / "operations" / "monitoring.md").read_text()
    m = re.search(r"```yaml\n(patches:\n  - target: \{kind: NetworkPolicy, name: scaler\}.*?)```", page, re.S)
    assert m, "monitoring.md: the NetworkPolicy patch is missing"
    (tmp_path / "deploy").symlink_to(DEPLOY, target_is_directory=True)
    (tmp_path / "install").mkdir()
    (tmp_path / "install" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../deploy/overlays/gke\n"
        + m[1]
    )
    policy = one(kustomize(tmp_path / "install"), "NetworkPolicy", "scaler")
    values = policy["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert values == ["gmp-system", "monitoring", "observability"]


def test_the_rayjob_authenticates_runs_restricted_and_admits_only_its_own_pods() -> None:
    docs = rendered("ray")
    job = one(docs, "RayJob", "scaler-tune")
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["authOptions"] == {"mode": "token"}
    major, minor, _ = (int(x) for x in cluster["rayVersion"].split("."))
    assert (major, minor) >= (2, 52), "Ray's token authentication needs Ray 2.52"
    templates = [("head", cluster["headGroupSpec"]["template"]), ("submitter", job["spec"]["submitterPodTemplate"])]
    templates += [(g["groupName"], g["template"]) for g in cluster["workerGroupSpecs"]]
    policy = one(docs, "NetworkPolicy", "scaler-tune")
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert policy["metadata"]["namespace"] == job["metadata"]["namespace"]
    for what, template in templates:
        spec = template["spec"]
        assert restricted_violations(template.get("metadata") or {}, spec) == [], what
        assert spec["automountServiceAccountToken"] is False, what
        assert selector.items() <= template["metadata"]["labels"].items(), f"{what} is not covered by the policy"
        for c in spec["containers"]:
            assert not c.get("ports"), f"{what}: no port is published beyond Ray's defaults"
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    own, operator = policy["spec"]["ingress"]
    assert own == {"from": [{"podSelector": {"matchLabels": selector}}]}
    assert operator["ports"] == [{"port": 8265, "protocol": "TCP"}]
    assert operator["from"][0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "kuberay-operator"}


# -- Google Cloud IAM ------------------------------------------------------------------------------


def test_the_dry_run_acts_as_its_own_read_only_google_service_account() -> None:
    def gsa(overlay: str) -> str:
        return str(one(rendered(overlay), "ServiceAccount")["metadata"]["annotations"]["iam.gke.io/gcp-service-account"])

    assert gsa("overlays/dry-run") == "scaler-dry-run@PROJECT_ID.iam.gserviceaccount.com"
    assert gsa("overlays/gke") == "scaler@PROJECT_ID.iam.gserviceaccount.com"
    role = yaml.safe_load((DEPLOY / "gke" / "iam-role-dry-run.yaml").read_text())
    assert set(role["includedPermissions"]) == {IAM_PERMISSIONS[c] for c in CLOUD_READ_CALLS}
    assert not set(role["includedPermissions"]) & {IAM_PERMISSIONS[c] for c in DELETE_CALLS}
    assert "compute.instanceGroupManagers.update" not in role["includedPermissions"]
    # The guide binds the dry-run's account alone before step 7, and the writer's after it.
    guide = GUIDE.read_text()
    step7 = guide.index("## 7. Switch to real deletions")
    before, after = guide[:step7], guide[step7:]
    assert "scaler-dry-run@${PROJECT_ID}.iam.gserviceaccount.com" in before
    assert "roles/scalerScaleDown\"" not in before and "iam-role.yaml\n" not in before.split("## 1.")[1].split("## 2.")[0]
    assert "--role \"projects/${PROJECT_ID}/roles/scalerScaleDown\" --condition-from-file" in after
    assert "--condition None" not in after


def guide_condition(project: str, cluster: str, zones: list[str]) -> str:
    """The IAM condition the install guide's step 7 builds, run by bash with these values."""
    guide = GUIDE.read_text()
    m = re.search(r"\n(MIG_PREFIX=.*?\ndone)\n", guide, re.S)
    assert m, "install-gke.md: the condition's loop is missing"
    script = f"PROJECT_ID={project}\nCLUSTER={cluster}\nZONES='{' '.join(zones)}'\n{m[1]}\nprintf %s \"$CONDITION\"\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, timeout=30)
    return out.stdout


def test_the_guides_iam_condition_admits_the_clusters_migs_and_no_other() -> None:
    zones = ["europe-west1-b", "europe-west1-c", "europe-west1-d"]
    expression = guide_condition("acme-prod", "prod", zones)
    assert len(re.findall(r"\|\||&&|!(?!=)", expression)) <= 12, "IAM conditions allow 12 logical operators"

    def allows(resource_type: str, name: str) -> bool:
        result = cel.evaluate(expression, {"resource": {"type": resource_type, "name": name, "service": ""}})
        assert isinstance(result, bool)
        return result

    mig = "compute.googleapis.com/InstanceGroupManager"
    for zone in zones:
        assert allows(mig, f"projects/acme-prod/zones/{zone}/instanceGroupManagers/gke-prod-default-pool-1a2b3c4d-grp")
        assert allows(mig, f"projects/acme-prod/zones/{zone}/instanceGroupManagers/gke-prod-spot-9f8e7d6c-grp")
    for name in (
        "projects/acme-prod/zones/europe-west1-b/instanceGroupManagers/gke-staging-default-pool-1a2b3c4d-grp",
        "projects/acme-prod/zones/europe-west1-b/instanceGroupManagers/web-frontend-mig",
        "projects/acme-prod/zones/us-central1-a/instanceGroupManagers/gke-prod-default-pool-1a2b3c4d-grp",
        "projects/other/zones/europe-west1-b/instanceGroupManagers/gke-prod-default-pool-1a2b3c4d-grp",
        "projects/acme-prod/zones/europe-west1-b/instanceGroupManagers/gke-production-pool-1a2b3c4d-grp",
    ):
        assert not allows(mig, name), name
    # Not MIGs: the project (scaler's start-up testIamPermissions), the cluster, an operation.
    assert allows("cloudresourcemanager.googleapis.com/Project", "projects/acme-prod")
    assert allows("container.googleapis.com/Cluster", "projects/acme-prod/locations/europe-west1/clusters/prod")
    assert allows("compute.googleapis.com/Operation", "projects/acme-prod/zones/europe-west1-b/operations/op-1")
