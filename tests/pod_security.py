"""The "restricted" Pod Security Standard, checked on the pod specs of rendered manifests.

:func:`restricted_violations` applies every check of the ``restricted`` level (which includes
``baseline``) of Kubernetes' Pod Security Standards, as the PodSecurity admission plugin of the
API server applies them to a pod (``k8s.io/pod-security-admission/policy``, checks of version
``latest`` as of 1.28): host namespaces, privileged containers, capabilities, hostPath volumes
and host ports, AppArmor, SELinux, ``/proc`` mount type, seccomp, sysctls, volume types,
privilege escalation, running as non-root and as a non-zero UID. Every container counts:
``containers``, ``initContainers`` and ``ephemeralContainers``.
``tests/test_real_hardening.py`` checks this function against the real API server's admission.

:func:`pod_specs` finds every pod spec in an object (a Pod, a Deployment's or a Job's template,
a RayJob's head, worker and submitter templates, ...).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["pod_specs", "restricted_violations"]

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)
_SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
})  # fmt: skip
_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
_APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def pod_specs(obj: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """Every pod spec in ``obj`` (any depth), as ``(path, metadata, spec)``: a mapping with a
    ``containers`` list is a pod spec; its ``metadata`` is its sibling's (a template's or the
    Pod's own), ``{}`` when there is none."""
    if isinstance(obj, Mapping):
        spec = obj.get("spec")
        if isinstance(spec, Mapping) and isinstance(spec.get("containers"), list):
            yield f"{path}.spec".lstrip("."), obj.get("metadata") or {}, spec
            return
        for key, value in obj.items():
            yield from pod_specs(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from pod_specs(value, f"{path}[{i}]")


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for key in _CONTAINER_LISTS:
        for i, c in enumerate(spec.get(key) or []):
            yield f"{key}[{i}] {c.get('name', '?')}", c


def restricted_violations(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> list[str]:
    """What keeps a pod with ``metadata`` and ``spec`` from the "restricted" level; ``[]`` when
    it meets it. Each entry names the check (as the admission plugin names it) and the field."""
    out: list[str] = []
    psc: Mapping[str, Any] = spec.get("securityContext") or {}
    containers = list(_containers(spec))

    def sc(c: Mapping[str, Any]) -> Mapping[str, Any]:
        return c.get("securityContext") or {}

    # baseline: hostProcess, host namespaces, privileged
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        out.append("hostProcess: securityContext.windowsOptions.hostProcess")
    for c_name, c in containers:
        if (sc(c).get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"hostProcess: {c_name}")
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(f"host namespaces: {field}=true")
    for c_name, c in containers:
        if sc(c).get("privileged"):
            out.append(f"privileged: {c_name}")
    # baseline: hostPath volumes, host ports
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            out.append(f"hostPath volumes: {v.get('name')}")
    for c_name, c in containers:
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                out.append(f"hostPort: {c_name} {p['hostPort']}")
    # baseline: AppArmor (annotations and, 1.30+, the appArmorProfile field)
    for key, value in (metadata.get("annotations") or {}).items():
        if key.startswith(_APPARMOR_PREFIX) and value != "runtime/default" and not value.startswith("localhost/"):
            out.append(f"AppArmor: {key}={value}")
    for where, ctx in (("pod", psc), *((n, sc(c)) for n, c in containers)):
        profile = ctx.get("appArmorProfile") or {}
        if profile and profile.get("type") not in ("RuntimeDefault", "Localhost"):
            out.append(f"AppArmor: {where} appArmorProfile {profile.get('type')}")
    # baseline: SELinux, /proc mount, sysctls
    for where, ctx in (("pod", psc), *((n, sc(c)) for n, c in containers)):
        se = ctx.get("seLinuxOptions") or {}
        if se.get("type", "") not in _SELINUX_TYPES or se.get("user") or se.get("role"):
            out.append(f"seLinuxOptions: {where}")
    for c_name, c in containers:
        if sc(c).get("procMount", "Default") != "Default":
            out.append(f"procMount: {c_name}")
    for s in psc.get("sysctls") or []:
        if s.get("name") not in _SAFE_SYSCTLS:
            out.append(f"sysctls: {s.get('name')}")
    # restricted: volume types
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= _RESTRICTED_VOLUMES:
            out.append(f"restricted volume types: {v.get('name')} ({', '.join(sorted(kinds - _RESTRICTED_VOLUMES))})")
    # restricted: privilege escalation
    for c_name, c in containers:
        if sc(c).get("allowPrivilegeEscalation") is not False:
            out.append(f"allowPrivilegeEscalation != false: {c_name}")
    # restricted: runAsNonRoot, runAsUser
    for c_name, c in containers:
        if sc(c).get("runAsNonRoot") is False:
            out.append(f"runAsNonRoot != true: {c_name}")
    if psc.get("runAsNonRoot") is not True and not all(sc(c).get("runAsNonRoot") is True for _, c in containers):
        out.append("runAsNonRoot != true: pod or every container must set it")
    for where, ctx in (("pod", psc), *((n, sc(c)) for n, c in containers)):
        if ctx.get("runAsUser") == 0:
            out.append(f"runAsUser=0: {where}")
    # restricted: seccomp (baseline forbids Unconfined; restricted wants RuntimeDefault/Localhost)
    allowed = ("RuntimeDefault", "Localhost")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if pod_seccomp is not None and pod_seccomp not in allowed:
        out.append(f"seccompProfile: pod {pod_seccomp}")
    for c_name, c in containers:
        own = (sc(c).get("seccompProfile") or {}).get("type")
        if own is not None and own not in allowed:
            out.append(f"seccompProfile: {c_name} {own}")
        elif own is None and pod_seccomp is None:
            out.append(f"seccompProfile: {c_name} unset (and no pod default)")
    # restricted: capabilities
    for c_name, c in containers:
        caps = sc(c).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"capabilities: {c_name} does not drop ALL")
        extra = set(caps.get("add") or []) - {"NET_BIND_SERVICE"}
        if extra:
            out.append(f"capabilities: {c_name} adds {', '.join(sorted(extra))}")
    return out
