"""A real Kubernetes v1.28.4 control plane for end-to-end tests, from ``../shared/k8s``.

``../shared/k8s/control-plane.sh`` starts etcd, kube-apiserver (RBAC, ServiceAccount tokens, an
audit log, the aggregation layer), kube-controller-manager and kube-scheduler on loopback ports.
There is no kubelet and no metrics-server; this module supplies what a test needs instead:

* :class:`ControlPlane` starts and stops it (``stop`` in a ``finally``; it only ever stops the
  PIDs the script recorded), talks to it as the admin (:meth:`ControlPlane.request` and the
  small object helpers), registers Nodes the way a kubelet would (:meth:`ControlPlane.add_node`),
  applies manifests, writes a kubeconfig acting as a ServiceAccount
  (:meth:`ControlPlane.service_account_kubeconfig`) and reads the audit log
  (:meth:`ControlPlane.audit`).
* :class:`Kubelet` plays the kubelet for every node: a pod bound to a node is marked Running
  and Ready (or Running and not Ready, for pods it is told to hold), a pod being deleted is
  removed at once (``gracePeriodSeconds: 0``).
* :class:`MetricsServer` serves ``metrics.k8s.io/v1beta1`` over HTTPS on loopback, registered
  through an ``APIService`` and an ``ExternalName`` Service, with per-node usage set by the test;
  :attr:`MetricsServer.fail_status` makes it answer an HTTP error (an outage).
* :class:`ScalerProcess` runs ``scaler run`` as a subprocess, its output in a file.
* :func:`running_cluster` starts the first three together and stops them on exit.

:func:`unavailable` says why the control plane cannot run here (no ``../shared/k8s``, no etcd, …)
so that tests skip with that reason. The module is a library for tests (the real-apiserver suite
``tests/test_real_apiserver.py``, and side-by-side runs of other autoscalers), not a test itself.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import httpx
from ports import free_port
from waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
SHARED_K8S = REPO.parent / "shared" / "k8s"
SCRIPT = SHARED_K8S / "control-plane.sh"
GI = 2**30
MI = 2**20

_CLUSTER_SCOPED = frozenset(
    {"Namespace", "Node", "ClusterRole", "ClusterRoleBinding", "APIService", "PersistentVolume", "PriorityClass"}
)


def unavailable() -> str:
    """Why the real control plane cannot start here (``""`` when it can)."""
    if not SCRIPT.is_file():
        return f"no real control plane: {SCRIPT} is missing (../shared/k8s beside the clone)"
    for tool, package in (("etcd", "etcd-server"), ("openssl", "openssl"), ("xz", "xz-utils")):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (Debian package {package}; `make test-deps` installs it as root)"
    return ""




def _running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def deploy_rbac(overlay: str, name: str) -> list[dict[str, Any]]:
    """The ``deploy/`` overlay's Namespace, ServiceAccount and RBAC objects (rendered by kubectl,
    as :func:`test_deploy.rendered` does), renamed to ``name`` (bindings follow), so several
    overlays can be bound side by side to different ServiceAccounts."""
    from test_deploy import rendered

    kinds = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    docs: list[dict[str, Any]] = [d for d in rendered(overlay) if d["kind"] in kinds]
    for d in docs:
        d["metadata"].pop("annotations", None)
        if d["kind"] != "Namespace":
            d["metadata"]["name"] = name
        if "roleRef" in d:
            d["roleRef"]["name"] = name
            for s in d["subjects"]:
                s["name"] = name
    return docs


def sa_user(sa: str, namespace: str = "scaler-system") -> str:
    """The user name of ServiceAccount ``sa`` of ``namespace``, as audit events name it."""
    return f"system:serviceaccount:{namespace}:{sa}"


def iso(ts: float) -> str:
    """RFC 3339 UTC, seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _rfc3339(text: str) -> float:
    """Unix seconds of an RFC 3339 time (``Z`` or an offset)."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def collection_path(kind: str, api_version: str, namespace: str | None = None) -> str:
    """``/api/v1/namespaces/NS/pods``-style path of a kind's collection (plural: ``kind`` lower
    case plus ``s``, true of every kind this module handles)."""
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    plural = kind.lower() + "s"
    if kind in _CLUSTER_SCOPED or namespace is None:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{namespace}/{plural}"


def object_path(obj: Mapping[str, Any]) -> str:
    """The path of one object."""
    meta = obj["metadata"]
    ns = None if obj["kind"] in _CLUSTER_SCOPED else meta.get("namespace", "default")
    return f"{collection_path(obj['kind'], obj['apiVersion'], ns)}/{meta['name']}"


class ApiError(Exception):
    """An unexpected HTTP status from the API server."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:300]}")
        self.status = status


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One audit log line (Metadata level): who, what, and the answer."""

    user: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    uri: str
    user_agent: str
    time: float
    received: float = 0.0
    """When the API server received the request (Unix seconds); :attr:`time` is when it answered."""
    stage: str = ""
    """``ResponseComplete``, or ``ResponseStarted`` for a WATCH that began streaming (its
    ``ResponseComplete`` comes when it ends)."""

    @property
    def display(self) -> str:
        """``verb resource[/subresource][.group] ns/name -> code``."""
        res = self.resource + (f"/{self.subresource}" if self.subresource else "")
        res += f".{self.group}" if self.group else ""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.verb} {res} {where} -> {self.code}"


def _audit_event(doc: Mapping[str, Any]) -> AuditEvent:
    ref = doc.get("objectRef") or {}
    stamp = doc.get("stageTimestamp") or doc.get("requestReceivedTimestamp") or ""
    try:
        ts = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        ts = 0.0
    try:
        received = _rfc3339(str(doc.get("requestReceivedTimestamp") or ""))
    except ValueError:
        received = ts
    return AuditEvent(
        user=str((doc.get("user") or {}).get("username") or ""),
        verb=str(doc.get("verb") or ""),
        group=str(ref.get("apiGroup") or ""),
        resource=str(ref.get("resource") or ""),
        subresource=str(ref.get("subresource") or ""),
        namespace=str(ref.get("namespace") or ""),
        name=str(ref.get("name") or ""),
        code=int((doc.get("responseStatus") or {}).get("code") or 0),
        uri=str(doc.get("requestURI") or ""),
        user_agent=str(doc.get("userAgent") or ""),
        time=ts,
        received=received,
        stage=str(doc.get("stage") or ""),
    )


class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback.

    Args:
        state_dir: where ``control-plane.sh`` keeps certificates, data, logs and PIDs.
        components: ``CONTROL_PLANE_COMPONENTS`` (default all three).
        etcd_quota_bytes: etcd's backend quota instead of the script's 2 GiB (big snapshots).
        go_memory_limit_bytes: ``GOMEMLIMIT`` of etcd and kube-apiserver (a soft limit on each
            one's Go heap: the garbage collector runs earlier rather than letting the heap double
            its live size; not a cap, the resident size can pass it).
        apiserver_args: flags added to kube-apiserver's command line (the last one wins), e.g.
            ``--watch-cache=false`` so that every WATCH is served by etcd and a compaction
            (:meth:`compact_etcd`) expires the resourceVersion of a watch that resumes.

    Use as a context manager, or :meth:`start` then :meth:`stop` in a ``finally``.
    """

    def __init__(
        self,
        state_dir: Path,
        components: str = "apiserver kcm scheduler",
        etcd_quota_bytes: int | None = None,
        go_memory_limit_bytes: int | None = None,
        apiserver_args: Iterable[str] = (),
    ) -> None:
        self.state_dir = Path(state_dir)
        self.components = components
        self.etcd_quota_bytes = etcd_quota_bytes
        self.go_memory_limit_bytes = go_memory_limit_bytes
        self.apiserver_args = tuple(apiserver_args)
        self.env: dict[str, str] = {}
        self._client: httpx.Client | None = None
        self._started = False
        self._restarted: list[subprocess.Popen[bytes]] = []

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout: float = 180.0) -> ControlPlane:
        """Start everything and wait for ``/readyz``.

        Raises:
            RuntimeError: the script failed (its output is in the message).
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._started = True  # from here on, stop() must run even if start fails half-way
        env = dict(os.environ, CONTROL_PLANE_COMPONENTS=self.components)
        if self.go_memory_limit_bytes:
            env["GOMEMLIMIT"] = str(self.go_memory_limit_bytes)
        if self.etcd_quota_bytes:
            # control-plane.sh runs the etcd on PATH with a 2 GiB backend quota; a snapshot of
            # 150,000 pods needs more: a wrapper first on PATH raises it (the last flag wins).
            etcd = shutil.which("etcd")
            assert etcd is not None
            wrapper = self.state_dir / "bin" / "etcd"
            wrapper.parent.mkdir(parents=True, exist_ok=True)
            wrapper.write_text(f'#!/bin/sh\nexec {etcd} "$@" --quota-backend-bytes={self.etcd_quota_bytes}\n')
            wrapper.chmod(0o755)
            env["PATH"] = f"{wrapper.parent}{os.pathsep}{env.get('PATH', '')}"
        if self.apiserver_args:
            env["K8S_BIN_DIR"] = str(self._wrapped_binaries())
        out = subprocess.run(
            ["bash", str(SCRIPT), "start", str(self.state_dir)],
            capture_output=True, text=True, timeout=timeout, env=env, check=False,
        )  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"control-plane.sh start failed:\n{out.stdout}\n{out.stderr}")
        for line in (self.state_dir / "env").read_text().splitlines():
            key, _, value = line.partition("=")
            if key:
                self.env[key] = value
        self._client = self.client()
        wait_for(self._default_service_account, 60, "the default ServiceAccount (controllers running)")
        return self

    def _wrapped_binaries(self) -> Path:
        """A ``K8S_BIN_DIR`` whose kube-apiserver runs the real one with :attr:`apiserver_args`
        added (``exec``: the PID is the real binary's), the other two linked; the real binaries
        unpacked first where ``control-plane.sh`` unpacks them."""
        real = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shared-k8s" / "v1.28.4"
        real.mkdir(parents=True, exist_ok=True)
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            binary = real / name
            if not binary.is_file():
                tmp = real / f"{name}.tmp.{os.getpid()}"
                with tmp.open("wb") as out:
                    subprocess.run(["xz", "-dc", str(SHARED_K8S / f"{name}.xz")], stdout=out, check=True)
                tmp.chmod(0o755)
                tmp.replace(binary)
        wrapped = self.state_dir / "bin"
        wrapped.mkdir(parents=True, exist_ok=True)
        for name in ("kube-controller-manager", "kube-scheduler"):
            link = wrapped / name
            if not link.exists():
                link.symlink_to(real / name)
        extra = " ".join(f"'{a}'" for a in self.apiserver_args)
        script = wrapped / "kube-apiserver"
        script.write_text(f'#!/bin/sh\nexec {real / "kube-apiserver"} "$@" {extra}\n')
        script.chmod(0o755)
        return wrapped

    def etcd_url(self) -> str:
        """etcd's client URL (``http://127.0.0.1:PORT``), from kube-apiserver's command line."""
        pid = self._pids()["kube-apiserver"]
        args = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        for i, arg in enumerate(args):
            if arg.startswith(b"--etcd-servers"):
                value = arg.partition(b"=")[2] or args[i + 1]
                return value.decode().split(",")[0]
        raise RuntimeError("kube-apiserver has no --etcd-servers")

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (its gRPC gateway's
        ``/v3/kv/compaction``), as kube-apiserver does every 5 minutes: a WATCH that resumes from
        an older resourceVersion, served by etcd (no watch cache), gets ``410 Expired``. Returns
        the revision."""
        with httpx.Client(base_url=self.etcd_url(), timeout=30) as etcd:
            head = etcd.post("/v3/kv/range", json={"key": "Lw=="}).json()["header"]  # key "/"
            revision = int(head["revision"])
            done = etcd.post("/v3/kv/compaction", json={"revision": str(revision), "physical": True})
            if done.status_code != 200 and "compacted" not in done.text:  # compacted there already: fine
                done.raise_for_status()
        return revision

    def stop(self) -> None:
        """Stop exactly what :meth:`start` started (the PIDs recorded by the script, a paused
        one continued first, a restarted kube-apiserver included)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._started:
            for name in self._pids():
                self.resume(name)
            subprocess.run(["bash", str(SCRIPT), "stop", str(self.state_dir)], timeout=60, check=False)
            self._started = False
        for proc in self._restarted:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        self._restarted.clear()

    # -- faults: pause, continue, restart a component ---------------------------------------------
    def _pids(self) -> dict[str, int]:
        """Component name (``etcd``, ``kube-apiserver``, …) → PID, from the script's ``pids`` file."""
        out: dict[str, int] = {}
        path = self.state_dir / "pids"
        if path.is_file():
            for line in path.read_text().splitlines():
                name, _, pid = line.partition(" ")
                if pid.strip().isdigit():
                    out[name] = int(pid)
        return out

    def pause(self, component: str) -> None:
        """SIGSTOP one component (``etcd``, ``kube-apiserver``): a freeze, as a stalled disk or a
        VM live migration. Always :meth:`resume` it (``stop`` does)."""
        os.kill(self._pids()[component], signal.SIGSTOP)

    def resume(self, component: str) -> None:
        """SIGCONT a component paused by :meth:`pause` (a running one ignores it)."""
        pid = self._pids().get(component)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def restart_apiserver(self, down_seconds: float = 0.0, timeout: float = 120.0) -> float:
        """Stop kube-apiserver (SIGTERM, as a rolling restart does; SIGKILL when it has not exited
        5 s later, as the kubelet does after its grace period), wait ``down_seconds``, start
        it again with the same command line (same port, same audit log, appended) and wait for
        ``/readyz``. The ``pids`` file names the new process, so :meth:`stop` stops it. Returns
        the seconds it did not answer.

        Raises:
            AssertionError: it did not stop, or did not become ready within ``timeout``.
        """
        pid = self._pids()["kube-apiserver"]
        args = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        down = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        try:  # its graceful shutdown waits for in-flight requests (up to their 60 s timeout)
            wait_for(lambda: not _running(pid), 5, "kube-apiserver to exit", poll=0.2)
        except AssertionError:
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not _running(pid), 30, "kube-apiserver to exit after SIGKILL", poll=0.2)
        time.sleep(down_seconds)
        with (self.state_dir / "logs" / "kube-apiserver.log").open("ab") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._restarted.append(proc)
        pids = self.state_dir / "pids"
        lines = [f"kube-apiserver {proc.pid}" if line.startswith("kube-apiserver ") else line
                 for line in pids.read_text().splitlines()]  # fmt: skip
        pids.write_text("\n".join(lines) + "\n")
        if self._client is not None:
            self._client.close()
        self._client = self.client()
        wait_for(self.ready, timeout, "kube-apiserver /readyz after the restart", poll=0.2)
        return time.monotonic() - down

    def ready(self) -> bool:
        """``/readyz`` answers 200."""
        try:
            with self.client() as c:
                return c.get("/readyz", timeout=3).status_code == 200
        except httpx.HTTPError:
            return False

    def __enter__(self) -> ControlPlane:
        """Start (stopped again if the start fails)."""
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        """Stop."""
        self.stop()

    def _default_service_account(self) -> bool:
        if "kcm" not in self.components.split():
            return True
        return self.get("ServiceAccount", "default", "default") is not None

    # -- paths -----------------------------------------------------------------------------------
    @property
    def server(self) -> str:
        """``https://127.0.0.1:PORT``."""
        return self.env["RK_SERVER"]

    @property
    def ca(self) -> Path:
        """The cluster CA certificate."""
        return Path(self.env["RK_CA"])

    @property
    def admin_kubeconfig(self) -> Path:
        """A kubeconfig for ``system:masters``."""
        return Path(self.env["RK_KUBECONFIG"])

    @property
    def audit_log(self) -> Path:
        """The audit log (JSON lines)."""
        return Path(self.env["RK_AUDIT_LOG"])

    @property
    def pki(self) -> Path:
        """The certificates folder (``apiserver.crt``/``.key`` serve loopback HTTPS too)."""
        return Path(self.env["RK_STATE"]) / "pki"

    # -- admin requests --------------------------------------------------------------------------
    def ssl_context(self) -> ssl.SSLContext:
        """A TLS client context trusting the cluster CA and holding the admin certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def client(self) -> httpx.Client:
        """A new admin client (one per thread)."""
        return httpx.Client(base_url=self.server, verify=self.ssl_context(), timeout=30.0)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        ok: Iterable[int] = (200, 201, 202),
        client: httpx.Client | None = None,
    ) -> dict[str, Any] | None:
        """One admin request; the decoded body, ``None`` on 404.

        Raises:
            ApiError: any status not in ``ok`` and not 404.
        """
        c = client or self._client
        assert c is not None, "control plane not started"
        content = None if body is None else json.dumps(body)
        r = c.request(method, path, content=content, params=params, headers={"Content-Type": content_type})
        if r.status_code == 404:
            return None
        if r.status_code not in set(ok):
            raise ApiError(r.status_code, r.text)
        return r.json() if r.content else {}

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj`` (a dict with apiVersion, kind, metadata)."""
        ns = obj["metadata"].get("namespace", "default")
        out = self.request("POST", collection_path(obj["kind"], obj["apiVersion"], ns), obj)
        assert out is not None
        return out

    def apply(self, docs: Iterable[Mapping[str, Any]]) -> None:
        """Create each object, or replace it when it exists."""
        for obj in docs:
            current = self.request("GET", object_path(obj))
            if current is None:
                self.create(obj)
                continue
            body = json.loads(json.dumps(obj))
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self.request("PUT", object_path(obj), body)

    def get(self, kind: str, name: str, namespace: str | None = None, api_version: str = "v1") -> dict[str, Any] | None:
        """One object, ``None`` when absent."""
        return self.request("GET", f"{collection_path(kind, api_version, namespace)}/{name}")

    def list(
        self, kind: str, namespace: str | None = None, api_version: str = "v1", **params: str
    ) -> list[dict[str, Any]]:
        """Items of a kind (cluster-wide when ``namespace`` is None); ``params`` are query
        parameters (``labelSelector=...``, ``fieldSelector=...``)."""
        doc = self.request("GET", collection_path(kind, api_version, namespace), params=params)
        return list((doc or {}).get("items") or [])

    def patch(
        self, kind: str, name: str, patch: Mapping[str, Any], namespace: str | None = None,
        api_version: str = "v1", subresource: str = "",
    ) -> dict[str, Any] | None:  # fmt: skip
        """A JSON merge patch (``None`` when the object is gone)."""
        path = f"{collection_path(kind, api_version, namespace)}/{name}" + (f"/{subresource}" if subresource else "")
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def delete(
        self, kind: str, name: str, namespace: str | None = None, api_version: str = "v1", grace: int | None = None
    ) -> None:
        """Delete one object (absent is fine)."""
        body = None if grace is None else {"gracePeriodSeconds": grace}
        self.request("DELETE", f"{collection_path(kind, api_version, namespace)}/{name}", body, ok=(200, 202))

    def delete_all(self, kind: str, namespace: str | None = None, api_version: str = "v1", grace: int | None = None) -> None:
        """``deletecollection`` of a kind (in ``namespace``, or cluster-scoped)."""
        params = {} if grace is None else {"gracePeriodSeconds": str(grace)}
        self.request("DELETE", collection_path(kind, api_version, namespace), params=params, ok=(200, 202))

    def events(self, reason: str | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        """core/v1 Events (cluster-wide), optionally of one reason."""
        return [e for e in self.list("Event", namespace) if reason is None or e.get("reason") == reason]

    # -- nodes and workloads -----------------------------------------------------------------------
    def add_node(
        self,
        name: str,
        pool: str = "pool-a",
        zone: str = "zone-a",
        *,
        cpu_millicores: int = 4000,
        memory_bytes: int = 16 * GI,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Register a Ready node as a kubelet would: create it (with ``annotations``, if any),
        set its status (capacity, allocatable, Ready) through the ``status`` subresource, and
        remove the ``node.kubernetes.io/not-ready`` taint admission put on it."""
        all_labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "cloud.google.com/gke-nodepool": pool,
            "topology.kubernetes.io/zone": zone,
            **(labels or {}),
        }
        meta: dict[str, Any] = {"name": name, "labels": all_labels}
        if annotations:
            meta["annotations"] = dict(annotations)
        self.create({"apiVersion": "v1", "kind": "Node", "metadata": meta})
        now = iso(time.time())
        resources = {"cpu": f"{cpu_millicores}m", "memory": str(memory_bytes), "pods": "110"}
        status = {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "played by the test",
                 "lastHeartbeatTime": now, "lastTransitionTime": now},
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.28.4", "architecture": "amd64", "operatingSystem": "linux"},
        }
        self.patch("Node", name, {"status": status}, subresource="status")
        node = wait_for(lambda: self.get("Node", name), 10, f"node {name}")
        taints = [t for t in node["spec"].get("taints") or [] if not t["key"].startswith("node.kubernetes.io/")]
        out = self.patch("Node", name, {"spec": {"taints": taints or None}})
        assert out is not None
        return out

    def set_schedulable(self, names: Iterable[str], schedulable: bool) -> None:
        """Cordon (``False``) or uncordon nodes."""
        for name in names:
            self.patch("Node", name, {"spec": {"unschedulable": None if schedulable else True}})

    def deployment(
        self,
        name: str,
        namespace: str,
        replicas: int,
        *,
        cpu_millicores: int = 100,
        memory_bytes: int = 256 * MI,
        labels: Mapping[str, str] | None = None,
        grace_seconds: int = 5,
    ) -> dict[str, Any]:
        """Create a Deployment of ``replicas`` pods labelled ``app: name``."""
        pod_labels = {"app": name, **(labels or {})}
        return self.create({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": {
                        "terminationGracePeriodSeconds": grace_seconds,
                        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9", "resources": {
                            "requests": {"cpu": f"{cpu_millicores}m", "memory": str(memory_bytes)}}}],
                    },
                },
            },
        })  # fmt: skip

    def pdb(self, name: str, namespace: str, app: str, *, max_unavailable: int = 1) -> dict[str, Any]:
        """A policy/v1 PodDisruptionBudget over ``app: <app>``."""
        return self.create({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": app}}},
        })  # fmt: skip

    def pods(self, namespace: str | None = None, app: str | None = None) -> list[dict[str, Any]]:
        """Pods (of ``app``), cluster-wide or in ``namespace``."""
        params = {"labelSelector": f"app={app}"} if app else {}
        return self.list("Pod", namespace, **params)

    def ready_pods(self, namespace: str, app: str) -> list[dict[str, Any]]:
        """Pods of ``app`` bound, Running and Ready, not being deleted."""
        return [p for p in self.pods(namespace, app) if pod_ready(p) and not p["metadata"].get("deletionTimestamp")]

    def place(self, deployment: Callable[[], Any], namespace: str, app: str, replicas: int, on: Iterable[str]) -> None:
        """Create a workload (``deployment()``) whose pods all land on the nodes ``on``: every
        other node is cordoned until its ``replicas`` pods are Running and Ready there."""
        targets = set(on)
        others = [n["metadata"]["name"] for n in self.list("Node") if n["metadata"]["name"] not in targets
                  and not n["spec"].get("unschedulable")]  # fmt: skip
        self.set_schedulable(others, False)
        try:
            deployment()
            wait_for(lambda: len(self.ready_pods(namespace, app)) >= replicas, 60, f"{replicas} ready {app} pods")
        finally:
            self.set_schedulable(others, True)

    def pdb_allows(self, name: str, namespace: str) -> int | None:
        """``status.disruptionsAllowed`` of a PDB once the disruption controller has seen its
        current generation (``None`` before)."""
        pdb = self.get("PodDisruptionBudget", name, namespace, "policy/v1")
        if pdb is None:
            return None
        status = pdb.get("status") or {}
        if status.get("observedGeneration") != pdb["metadata"].get("generation"):
            return None
        return int(status.get("disruptionsAllowed") or 0)

    # -- acting as a ServiceAccount --------------------------------------------------------------
    def service_account_kubeconfig(self, name: str, namespace: str, path: Path, seconds: int = 3600) -> Path:
        """Write a kubeconfig acting as ServiceAccount ``namespace/name`` (a TokenRequest)."""
        token = self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}},
        )  # fmt: skip
        assert token is not None, f"no ServiceAccount {namespace}/{name}"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "real", "cluster": {"server": self.server, "certificate-authority": str(self.ca)}}],
            "users": [{"name": name, "user": {"token": token["status"]["token"]}}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": name}}],
            "current-context": "real",
        }))  # fmt: skip
        return path

    # -- audit -----------------------------------------------------------------------------------
    def audit_offset(self) -> int:
        """The audit log's current size: pass it to :meth:`audit` to read only what follows."""
        try:
            return self.audit_log.stat().st_size
        except FileNotFoundError:
            return 0

    def audit(self, since: int = 0, user: str | None = None) -> list[AuditEvent]:
        """Audit events written after byte ``since`` (of ``user``, e.g.
        ``system:serviceaccount:NS:NAME``), in log order."""
        with self.audit_log.open("rb") as f:
            f.seek(since)
            data = f.read()
        out = []
        for line in data.splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue  # a line being written
            event = _audit_event(doc)
            if user is None or event.user == user:
                out.append(event)
        return out


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """Bound, Running, with condition Ready True."""
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return bool((pod.get("spec") or {}).get("nodeName")) and status.get("phase") == "Running" and ready


def pod_status(pod: Mapping[str, Any], ready: bool) -> dict[str, Any]:
    """The status a kubelet would write for a started pod."""
    now = iso(time.time())
    flag = "True" if ready else "False"
    containers = pod["spec"].get("containers") or []
    return {
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "podIP": "10.244.0.1",
        "startTime": now,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": now},
            {"type": "Ready", "status": flag, "lastTransitionTime": now},
        ],
        "containerStatuses": [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": ready, "started": True,
             "restartCount": 0, "state": {"running": {"startedAt": now}}}
            for c in containers
        ],
    }


class Kubelet:
    """Plays the kubelet of every node: watches pods (as the admin) and

    * marks a pod bound to a node Running and Ready (status subresource), or Running and not
      Ready (for a while, or for good) when it matches a :meth:`hold` rule;
    * deletes a pod being deleted (``deletionTimestamp`` set) at once, with ``gracePeriodSeconds: 0``.

    Args:
        control_plane: the started control plane.
    """

    def __init__(self, control_plane: ControlPlane) -> None:
        self.cp = control_plane
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._holds: list[tuple[str, str, float, float | None]] = []  # (namespace, app, created after, delay)
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()
        self.errors: list[str] = []

    def start(self) -> Kubelet:
        """Start the watch thread."""
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the watch thread (within a few seconds)."""
        self.release_holds()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)

    def hold(self, namespace: str, app: str, seconds: float | None = None) -> None:
        """Pods of ``app`` in ``namespace`` created from now on start not Ready, and become Ready
        after ``seconds`` (``None``: never), like a slow readiness probe."""
        with self._lock:
            self._holds.append((namespace, app, time.time() - 1.0, seconds))

    def release_holds(self) -> None:
        """Forget every :meth:`hold` (pods already held stay as they are)."""
        with self._lock:
            self._holds.clear()
            timers, self._timers = self._timers, []
        for t in timers:
            t.cancel()

    def _held(self, pod: Mapping[str, Any]) -> tuple[bool, float | None]:
        """(held, seconds until Ready or ``None`` for never) for a pod being started."""
        meta = pod["metadata"]
        app = (meta.get("labels") or {}).get("app")
        created = meta.get("creationTimestamp") or ""
        ts = dt.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() if created else 0.0
        with self._lock:
            for ns, a, after, seconds in self._holds:
                if ns == meta.get("namespace") and a == app and ts >= after:
                    return True, seconds
        return False, None

    def _ready_later(self, pod: Mapping[str, Any], path: str, seconds: float) -> None:
        def ready() -> None:
            # Retried for a minute: the API server may be restarting or frozen (a fault test).
            deadline = time.monotonic() + 60
            while True:
                try:
                    with self.cp.client() as client:
                        r = client.patch(path + "/status", content=json.dumps({"status": pod_status(pod, ready=True)}),
                                         headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
                except httpx.HTTPError as e:
                    status, text = 0, str(e)
                else:
                    status, text = r.status_code, r.text
                if status in (200, 404, 409):
                    return
                if time.monotonic() > deadline or self._stop.is_set():
                    self.errors.append(f"status {path}: {status} {text[:200]}")
                    return
                self._stop.wait(1.0)

        timer = threading.Timer(seconds, ready)
        timer.daemon = True
        with self._lock:
            self._timers.append(timer)
        timer.start()

    def _handle(self, client: httpx.Client, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        if meta.get("deletionTimestamp"):
            body = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
            r = client.request("DELETE", path, content=json.dumps(body), headers={"Content-Type": "application/json"})
            if r.status_code not in (200, 404, 409):
                self.errors.append(f"delete {path}: {r.status_code} {r.text[:200]}")
            return
        if not (pod.get("spec") or {}).get("nodeName"):
            return
        if (pod.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        held, seconds = self._held(pod)
        status = pod_status(pod, ready=not held)
        if held and seconds is not None:
            self._ready_later(pod, path, seconds)
        r = client.patch(path + "/status", content=json.dumps({"status": status}),
                         headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
        if r.status_code not in (200, 404, 409):
            self.errors.append(f"status {path}: {r.status_code} {r.text[:200]}")

    def _run(self) -> None:
        def relist(client: httpx.Client) -> str:
            r = client.get("/api/v1/pods")
            r.raise_for_status()
            doc = r.json()
            for pod in doc.get("items") or []:
                self._handle(client, pod)
            return str(doc["metadata"]["resourceVersion"])

        def handle(client: httpx.Client, event: str, pod: Mapping[str, Any]) -> None:
            self._handle(client, pod)

        list_and_watch(self.cp, "/api/v1/pods", relist, handle, self._stop, self.errors, events=("ADDED", "MODIFIED"),
                       watch_seconds=2, what="watch")  # fmt: skip


def list_and_watch(
    cp: ControlPlane,
    path: str,
    relist: Callable[[httpx.Client], str],
    handle: Callable[[httpx.Client, str, Mapping[str, Any]], None],
    stop: threading.Event,
    errors: list[str],
    *,
    events: tuple[str, ...] = ("ADDED", "MODIFIED", "DELETED"),
    watch_seconds: int = 5,
    what: str = "",
    reconnect: bool = False,
) -> None:
    """LIST then WATCH ``path`` as the admin until ``stop`` is set, as an informer does.

    ``relist(client)`` LISTs (handling every item) and returns the list's resourceVersion; the
    watch then starts from it (``timeoutSeconds`` ``watch_seconds``, bookmarks on) and hands each
    event whose type is in ``events`` to ``handle(client, type, object)``. A 410 Gone, an
    ``ERROR`` event or a failed request starts over with a LIST; a failure is appended to
    ``errors`` (prefixed ``what``, default ``path``) and waited out for 0.5 s, with a fresh
    connection when ``reconnect`` (the API server may be restarting)."""
    client = cp.client()
    rv = ""
    try:
        while not stop.is_set():
            try:
                if not rv:
                    rv = relist(client)
                params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true",
                          "timeoutSeconds": str(watch_seconds)}  # fmt: skip
                with client.stream("GET", path, params=params, timeout=watch_seconds + 10) as resp:
                    if resp.status_code == 410:
                        rv = ""
                        continue
                    resp.raise_for_status()
                    for line in resp.iter_lines():
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            rv = ""
                            break
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        if event.get("type") in events:
                            handle(client, event["type"], obj)
            except (httpx.HTTPError, ValueError, KeyError) as e:
                if stop.is_set():
                    break
                errors.append(f"{what or path}: {e}")
                rv = ""
                stop.wait(0.5)
                if reconnect:
                    try:
                        client.close()
                        client = cp.client()
                    except OSError:
                        pass
    finally:
        client.close()


class MetricsServer:
    """``metrics.k8s.io/v1beta1`` for the real API server: an HTTPS server on loopback (the
    API server's own certificate; the APIService skips verification) answering discovery,
    ``nodes`` and ``pods`` from the cluster's current Nodes and Pods, plus empty OpenAPI
    documents.

    Attributes:
        node_usage: node name → (CPU millicores, memory bytes); nodes not in it use
            :attr:`default_node_usage`.
        default_node_usage: (CPU millicores, memory bytes) of other nodes.
        pod_usage: (CPU millicores, memory bytes) per container of every pod not in
            :attr:`app_usage`.
        app_usage: ``app`` label value → (CPU millicores, memory bytes) per container of its pods.
        fail_status: when set, every metrics request answers this HTTP status (an outage).
        window_seconds: the ``window`` of every NodeMetrics and PodMetrics (seconds; a pod that
            started within it is not in its node's reading yet).
        requests: paths served, in order.
        held_namespace: when set, a PodMetrics LIST of this namespace is answered only once
            :attr:`release` is set (at most 50 s later): a slow aggregated request, which holds
            its API Priority and Fairness seat on the API server meanwhile.
        release: see :attr:`held_namespace`.
    """

    def __init__(self, control_plane: ControlPlane) -> None:
        self.cp = control_plane
        self.node_usage: dict[str, tuple[int, int]] = {}
        self.default_node_usage = (200, 2 * GI)
        self.pod_usage = (10, 64 * MI)
        self.app_usage: dict[str, tuple[int, int]] = {}
        self.fail_status: int | None = None
        self.window_seconds = 30
        self.requests: list[str] = []
        self.held_namespace: str | None = None
        self.release = threading.Event()
        self._local = threading.local()
        self._fixed: dict[str, list[tuple[str, float, bytes, bytes]]] | None = None
        self._fixed_lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                status, body = outer._answer(urlsplit(self.path).path)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(control_plane.pki / "apiserver.crt"), str(control_plane.pki / "apiserver.key"))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, name="metrics-server", daemon=True)

    def start(self, register: bool = True) -> MetricsServer:
        """Serve, and (``register``) create the Service and APIService and wait until the API
        server serves node metrics through it."""
        self._thread.start()
        if register:
            self.cp.apply([
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics-server", "namespace": "kube-system"},
                 "spec": {"type": "ExternalName", "externalName": "localhost",
                          "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}]}},
                {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1beta1.metrics.k8s.io"},
                 "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": True,
                          "groupPriorityMinimum": 100, "versionPriority": 100,
                          "service": {"namespace": "kube-system", "name": "metrics-server", "port": self.port}}},
            ])  # fmt: skip
            wait_for(self._served, 60, "metrics.k8s.io served through the aggregator")
        return self

    def serve_snapshot(self, node_metrics: Iterable[Mapping[str, Any]], pod_metrics: Iterable[Mapping[str, Any]]) -> None:
        """Serve these ``NodeMetrics`` and ``PodMetrics`` items (a snapshot's) instead of usage
        made up from the cluster's nodes and pods. Each keeps its age: its ``timestamp`` is
        re-stamped on every answer to now minus (the newest NodeMetrics timestamp, the
        snapshot's "now", minus its own), so stale metrics stay stale. Items are encoded once;
        an answer joins them with the fresh timestamps (a 150,000-pod list is about 60 MB)."""
        placeholder = "@@timestamp@@"

        def encoded(items: Iterable[Mapping[str, Any]]) -> list[tuple[str, float, bytes, bytes]]:
            out = []
            for item in items:
                obj = {k: v for k, v in item.items() if k not in ("kind", "apiVersion")}
                ts = str(obj.get("timestamp") or "")
                obj["timestamp"] = placeholder
                head, _, tail = json.dumps(obj, separators=(",", ":")).partition(placeholder)
                ns = str((obj.get("metadata") or {}).get("namespace") or "")
                out.append((ns, _rfc3339(ts) if ts else 0.0, head.encode(), tail.encode()))
            return out

        nodes, pods = encoded(node_metrics), encoded(pod_metrics)
        newest = max((t for _, t, _, _ in nodes), default=0.0) or max((t for _, t, _, _ in pods), default=0.0)
        with self._fixed_lock:
            self._fixed = {
                what: [(ns, newest - t if t else 0.0, head, tail) for ns, t, head, tail in items]
                for what, items in (("nodes", nodes), ("pods", pods))
            }

    def _fixed_answer(self, what: str, namespace: str | None) -> bytes:
        assert self._fixed is not None
        now = time.time()
        stamps: dict[float, bytes] = {}
        parts = []
        for ns, age, head, tail in self._fixed[what]:
            if namespace is not None and ns != namespace:
                continue
            stamp = stamps.get(age)
            if stamp is None:
                stamp = stamps[age] = iso(now - age).encode()
            parts.append(head + stamp + tail)
        kind = b"NodeMetricsList" if what == "nodes" else b"PodMetricsList"
        return b'{"kind":"' + kind + b'","apiVersion":"metrics.k8s.io/v1beta1","metadata":{},"items":[' + b",".join(parts) + b"]}"

    def _served(self) -> bool:
        try:
            return self.cp.request("GET", "/apis/metrics.k8s.io/v1beta1/nodes", ok=(200,)) is not None
        except ApiError:
            return False

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()

    def _client(self) -> httpx.Client:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self.cp.client()
        return client  # type: ignore[no-any-return]

    def _answer(self, path: str) -> tuple[int, Any]:  # body: JSON-able, or encoded bytes
        self.requests.append(path)
        base = "/apis/metrics.k8s.io/v1beta1"
        if self.held_namespace is not None and path == f"{base}/namespaces/{self.held_namespace}/pods":
            self.release.wait(50)
        if path == "/openapi/v2":
            return 200, {"swagger": "2.0", "info": {"title": "metrics", "version": "v1beta1"}, "paths": {}}
        if path.startswith("/openapi/v3"):
            return 200, {"paths": {}}
        if not path.startswith(base):
            return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}
        if self.fail_status is not None:
            return self.fail_status, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "message": "injected outage", "code": self.fail_status}  # fmt: skip
        now = iso(time.time())
        if path in (base, base + "/"):
            return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.k8s.io/v1beta1",
                         "resources": [
                             {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": ["get", "list"]},
                             {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]},
                         ]}  # fmt: skip
        if self._fixed is not None:
            if path == base + "/nodes":
                return 200, self._fixed_answer("nodes", None)
            if path == base + "/pods" or (path.startswith(base + "/namespaces/") and path.endswith("/pods")):
                return 200, self._fixed_answer("pods", path.split("/")[5] if "/namespaces/" in path else None)
            return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}
        client = self._client()
        if path == base + "/nodes":
            items = []
            for node in client.get("/api/v1/nodes").json().get("items") or []:
                name = node["metadata"]["name"]
                cpu, mem = self.node_usage.get(name, self.default_node_usage)
                items.append({"metadata": {"name": name, "creationTimestamp": now}, "timestamp": now, "window": f"{self.window_seconds}s",
                              "usage": {"cpu": f"{cpu}m", "memory": str(mem)}})  # fmt: skip
            return 200, {"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}
        if path == base + "/pods" or (path.startswith(base + "/namespaces/") and path.endswith("/pods")):
            ns = path.split("/")[5] if "/namespaces/" in path else None
            url = f"/api/v1/namespaces/{ns}/pods" if ns else "/api/v1/pods"
            items = []
            for pod in client.get(url).json().get("items") or []:
                if (pod.get("status") or {}).get("phase") != "Running":
                    continue
                meta = pod["metadata"]
                cpu, mem = self.app_usage.get((meta.get("labels") or {}).get("app", ""), self.pod_usage)
                containers = [{"name": c["name"], "usage": {"cpu": f"{cpu}m", "memory": str(mem)}}
                              for c in pod["spec"].get("containers") or []]  # fmt: skip
                items.append({"metadata": {"name": meta["name"], "namespace": meta["namespace"], "creationTimestamp": now},
                              "timestamp": now, "window": f"{self.window_seconds}s", "containers": containers})  # fmt: skip
            return 200, {"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}


FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1beta3"


class Throttle:
    """API Priority and Fairness holding some requests of some ServiceAccounts back, on the real
    API server: a PriorityLevelConfiguration of the fewest seats (nominal share 1, none lent or
    borrowed) and a FlowSchema sending those requests to it. While :meth:`hold` keeps its seats
    busy (a ServiceAccount of its own LISTs the metrics API in namespace ``held``, which the
    :class:`MetricsServer` answers only on :meth:`release`: each such request holds its seat),
    the requests are answered ``429`` with ``Retry-After`` (``reject``) or wait in its queue
    until released (at most the API server's queue wait limit, 15 s by default, then 429).

    Args:
        cp, metrics: the control plane and its metrics server.
        name: the priority level's, flow schema's and blocker's name.
        subjects: (namespace, ServiceAccount) whose requests are held.
        verbs, resources: which of their requests (core group, cluster-wide and namespaced).
        reject: answer 429 rather than queue.

    Use as a context manager: the objects are created on enter (once the API server applied
    them) and deleted on exit, the seats released first.
    """

    def __init__(
        self, cp: ControlPlane, metrics: MetricsServer, name: str, subjects: Iterable[tuple[str, str]],
        verbs: Iterable[str] = ("list", "watch"), resources: Iterable[str] = ("pods",), *, reject: bool = True,
    ) -> None:  # fmt: skip
        self.cp, self.metrics, self.name = cp, metrics, name
        self.subjects, self.verbs, self.resources = list(subjects), list(verbs), list(resources)
        self.reject = reject
        self._threads: list[threading.Thread] = []
        self.blocked: list[int] = []  # the blockers' own answers

    def _objects(self) -> list[dict[str, Any]]:
        limit = (
            {"type": "Reject"} if self.reject
            else {"type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 50}}
        )  # fmt: skip
        subject = [{"kind": "ServiceAccount", "serviceAccount": {"name": sa, "namespace": ns}} for ns, sa in self.subjects]
        blocker = [{"kind": "ServiceAccount", "serviceAccount": {"name": self.name, "namespace": "kube-system"}}]
        return [
            {"apiVersion": "flowcontrol.apiserver.k8s.io/v1beta3", "kind": "PriorityLevelConfiguration",
             "metadata": {"name": self.name},
             "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                                                     "borrowingLimitPercent": 0, "limitResponse": limit}}},
            {"apiVersion": "flowcontrol.apiserver.k8s.io/v1beta3", "kind": "FlowSchema", "metadata": {"name": self.name},
             "spec": {"priorityLevelConfiguration": {"name": self.name}, "matchingPrecedence": 100,
                      "distinguisherMethod": {"type": "ByUser"},
                      "rules": [
                          {"subjects": subject, "resourceRules": [{"verbs": self.verbs, "apiGroups": [""],
                           "resources": self.resources, "clusterScope": True, "namespaces": ["*"]}]},
                          {"subjects": blocker, "resourceRules": [{"verbs": ["list"], "apiGroups": ["metrics.k8s.io"],
                           "resources": ["pods"], "namespaces": ["held"]}]},
                      ]}},
        ]  # fmt: skip

    def __enter__(self) -> Throttle:
        """Create the blocker's ServiceAccount and RBAC, the priority level and flow schema."""
        self.cp.apply([
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": self.name, "namespace": "kube-system"}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": self.name},
             "rules": [{"apiGroups": ["metrics.k8s.io"], "resources": ["pods"], "verbs": ["list"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": self.name},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": self.name},
             "subjects": [{"kind": "ServiceAccount", "name": self.name, "namespace": "kube-system"}]},
        ])  # fmt: skip
        token = self.cp.request(
            "POST", f"/api/v1/namespaces/kube-system/serviceaccounts/{self.name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
        )  # fmt: skip
        assert token is not None
        self._token = str(token["status"]["token"])
        pl, fs = self._objects()
        self.cp.request("POST", f"{FLOWCONTROL}/prioritylevelconfigurations", pl)
        self.cp.request("POST", f"{FLOWCONTROL}/flowschemas", fs)
        self.seats = int(wait_for(self._seats, 30, f"priority level {self.name} in force"))
        return self

    def _seats(self) -> int:
        """The priority level's seats as the API server applies it (0 while it does not yet)."""
        with self.cp.client() as c:
            samples = prometheus_samples(c.get("/metrics").text, "apiserver_flowcontrol_nominal_limit_seats")
        return int(samples.get(f'priority_level="{self.name}"', 0))

    def hold(self) -> None:
        """Take every seat (one blocker request per seat, and two more queued or refused) and
        return once they are taken."""
        self.metrics.release.clear()
        self.metrics.held_namespace = "held"
        before = self.metrics.requests.count("/apis/metrics.k8s.io/v1beta1/namespaces/held/pods")

        def block() -> None:
            with httpx.Client(base_url=self.cp.server, verify=ssl.create_default_context(cafile=str(self.cp.ca)), timeout=70,
                              headers={"Authorization": f"Bearer {self._token}"}) as c:  # fmt: skip
                self.blocked.append(c.get("/apis/metrics.k8s.io/v1beta1/namespaces/held/pods").status_code)

        for _ in range(self.seats + 2):
            t = threading.Thread(target=block, name=f"{self.name}-blocker", daemon=True)
            t.start()
            self._threads.append(t)
        wait_for(
            lambda: self.metrics.requests.count("/apis/metrics.k8s.io/v1beta1/namespaces/held/pods") >= before + self.seats,
            30, "every seat held",
        )  # fmt: skip

    def release(self) -> None:
        """Answer the blockers: the seats are free again."""
        self.metrics.release.set()
        for t in self._threads:
            t.join(70)
        self._threads.clear()
        self.metrics.held_namespace = None

    def __exit__(self, *exc: object) -> None:
        """Release, delete the flow schema, priority level and blocker."""
        self.release()
        self.cp.request("DELETE", f"{FLOWCONTROL}/flowschemas/{self.name}", ok=(200, 202))
        self.cp.request("DELETE", f"{FLOWCONTROL}/prioritylevelconfigurations/{self.name}", ok=(200, 202))
        self.cp.delete("ClusterRoleBinding", self.name, api_version="rbac.authorization.k8s.io/v1")
        self.cp.delete("ClusterRole", self.name, api_version="rbac.authorization.k8s.io/v1")


class LoggedProcess:
    """A subprocess whose stdout and stderr are appended to ``log``; :attr:`output` is what it
    appended since :meth:`start`. Subclasses set :attr:`args` and :attr:`env`."""

    args: list[str]
    env: dict[str, str]

    def __init__(self, log: Path) -> None:
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self._offset = 0

    def start(self) -> Self:
        """Start it (its output is what it appends to ``log`` from now on)."""
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        return self

    @property
    def output(self) -> str:
        """What this run printed so far."""
        if not self.log.exists():
            return ""
        with self.log.open("rb") as f:
            f.seek(self._offset)
            return f.read().decode("utf-8", "replace")

    def alive(self) -> bool:
        """Still running."""
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL (``kill -9``) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


class ScalerProcess(LoggedProcess):
    """``scaler run`` as a subprocess of this interpreter, its output appended to ``log``.

    Args:
        kubeconfig: the kubeconfig it uses.
        args: flags after ``scaler run --kubeconfig …``.
        log: output file (stdout and stderr).
        env: extra environment variables.
        python: the interpreter whose ``scaler`` runs (default: this one).
    """

    def __init__(
        self, kubeconfig: Path, args: Iterable[str], log: Path, env: Mapping[str, str] | None = None, python: str = ""
    ) -> None:
        # -P: another interpreter's scaler, not the one in the current directory
        interpreter = [python, "-P"] if python else [sys.executable]
        super().__init__(log)
        self.args = [*interpreter, "-m", "scaler.cli", "run", "--kubeconfig", str(kubeconfig), *args]
        self.env = dict(os.environ, **(env or {}))
        if "POD_NAME" not in (env or {}):
            self.env.pop("POD_NAME", None)  # the hostname-based identity, as on a plain host

    def wait_output(self, text: str, timeout: float = 30.0) -> None:
        """Wait until ``text`` appears in the output (fails early if the process exits)."""

        def seen() -> bool:
            if text in self.output:
                return True
            assert self.alive(), f"scaler exited ({self.proc.returncode if self.proc else None}):\n{self.output[-3000:]}"
            return False

        wait_for(seen, timeout, f"{text!r} in scaler's output")

    def metrics_port(self, timeout: float = 60.0) -> int:
        """The port of ``/metrics`` and ``/healthz``, read from the process's own log line (run
        it with ``--address=127.0.0.1:0``: no port is picked ahead and raced for)."""
        pattern = re.compile(r"serving /metrics and /healthz on [^ ]*:(\d+)")
        self.wait_output("serving /metrics and /healthz on", timeout)
        found = pattern.search(self.output)
        assert found is not None, self.output[-2000:]
        return int(found[1])

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM, wait; returns the exit status. Still running after ``timeout``: SIGUSR1 first
        (``scaler run`` writes every thread's stack to its log), then the timeout is raised with
        the log's end, which shows where the shutdown waits."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)
            with contextlib.suppress(AssertionError):  # a process stuck outside Python writes none
                wait_for(lambda: "stacks of" in self.output, 5, "the stack dump", poll=0.1)
            raise AssertionError(f"no exit {timeout:.0f}s after SIGTERM; threads:\n{self.output[-6000:]}") from None

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for it to exit; returns the exit status."""
        assert self.proc is not None
        return self.proc.wait(timeout)


@contextlib.contextmanager
def running_cluster(
    state_dir: Path, apiserver_args: Iterable[str] = ()
) -> Iterator[tuple[ControlPlane, Kubelet, MetricsServer]]:
    """A started control plane (kube-apiserver with ``apiserver_args`` added) with its
    :class:`Kubelet` and a registered :class:`MetricsServer`; all three stopped on exit,
    whatever happened."""
    cp = ControlPlane(state_dir, apiserver_args=apiserver_args)
    kubelet: Kubelet | None = None
    metrics: MetricsServer | None = None
    try:
        cp.start()
        kubelet = Kubelet(cp).start()
        metrics = MetricsServer(cp).start()
        yield cp, kubelet, metrics
    finally:
        if metrics is not None:
            metrics.stop()
        if kubelet is not None:
            kubelet.stop()
        cp.stop()


@contextlib.contextmanager
def scaler_process(
    kubeconfig: Path, args: Iterable[str], log: Path, env: Mapping[str, str] | None = None, python: str = ""
) -> Iterator[ScalerProcess]:
    """A started :class:`ScalerProcess`, killed on exit if still running."""
    proc = ScalerProcess(kubeconfig, args, log, env, python).start()
    try:
        yield proc
    finally:
        proc.kill()


# -- the real cluster-autoscaler (../shared/ca) ------------------------------------------------------

SHARED_CA = REPO.parent / "shared" / "ca"
CA_ARCHIVE = SHARED_CA / "cluster-autoscaler.xz"
CA_VERSION = "1.30.7"
CA_NAMESPACE = "kube-system"
CA_FLAGS = (
    "--cloud-provider=kwok", "--leader-elect=false", "--logtostderr=true",
    "--scale-down-delay-after-add=0s", "--max-bulk-soft-taint-count=0",
)  # fmt: skip
"""Flags of every run: the kwok provider, no leader election, no soft taints (the cluster stays
exactly as loaded for the other autoscaler), no cooldown after start-up."""

_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]+\] (.*)$")
_UNNEEDED = re.compile(r"^(\S+) is unneeded since ")
_PROM = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ([-+0-9.eEInfa]+)$')


def ca_unavailable() -> str:
    """Why the real cluster-autoscaler cannot run here (``""`` when it can)."""
    if not CA_ARCHIVE.is_file():
        return f"no cluster-autoscaler: {CA_ARCHIVE} is missing (../shared/ca beside the clone)"
    if shutil.which("xz") is None:
        return "xz is not on PATH (Debian package xz-utils)"
    return unavailable()


def ca_binary() -> Path:
    """The unpacked cluster-autoscaler binary: ``../shared/ca/cluster-autoscaler.xz`` unpacked
    once into ``${XDG_CACHE_HOME:-~/.cache}/shared-ca/<version>/`` and checked against
    ``../shared/ca/sha256sums``.

    Raises:
        RuntimeError: unpacking failed or the checksum differs.
    """
    import hashlib

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shared-ca" / CA_VERSION
    binary = cache / "cluster-autoscaler"
    expected = ""
    sums = SHARED_CA / "sha256sums"
    if sums.is_file():
        for line in sums.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("*") == "cluster-autoscaler":
                expected = parts[0]
    if not binary.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f"cluster-autoscaler.tmp.{os.getpid()}"
        with tmp.open("wb") as out:
            done = subprocess.run(["xz", "-dc", str(CA_ARCHIVE)], stdout=out, check=False)
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise RuntimeError(f"cannot unpack {CA_ARCHIVE}")
        tmp.chmod(0o755)
        tmp.replace(binary)
    if expected:
        digest = hashlib.sha256(binary.read_bytes()).hexdigest()
        if digest != expected:
            raise RuntimeError(f"{binary}: sha256 {digest}, expected {expected} (../shared/ca/sha256sums)")
    return binary


@dataclass(frozen=True, slots=True)
class CaLoop:
    """One RunOnce of cluster-autoscaler, read from its ``--v=4`` log.

    Attributes:
        unneeded: the nodes it found unneeded (``<node> is unneeded since …``, logged for every
            unneeded node at the end of the planner's update).
        lines: the loop's log messages (without the klog header).
    """

    unneeded: frozenset[str]
    lines: tuple[str, ...]

    def unremovable(self) -> dict[str, str]:
        """node → the reason the loop logged (eligibility and simulation messages)."""
        out: dict[str, str] = {}
        for line in self.lines:
            for prefix in ("Node ", "node "):
                if not line.startswith(prefix):
                    continue
                name, _, rest = line[len(prefix):].partition(" ")
                if rest.startswith(("unremovable:", "is not suitable for removal:", "cannot be removed:")):
                    out[name] = rest
        return out


class ClusterAutoscaler(LoggedProcess):
    """The real cluster-autoscaler (``../shared/ca``, 1.30.7, kwok cloud provider) as a
    subprocess, its output in ``log``.

    It needs the kwok provider's ConfigMaps in ``namespace`` and kwok-shaped nodes (see
    :mod:`benchmarks.peer.objects`). **It is only ever stopped with SIGKILL**: on SIGTERM or
    SIGINT its cleanup hook deletes every node of every kwok node group.

    Args:
        kubeconfig: an admin kubeconfig.
        log: output file (stdout and stderr).
        args: flags after :data:`CA_FLAGS` and ``--kubeconfig``/``--namespace``/``--address``
            (e.g. ``--v=4``, ``--scale-down-unneeded-time=1h``).
        namespace: ``--namespace`` and ``POD_NAMESPACE`` (where its ConfigMaps are).
    """

    def __init__(self, kubeconfig: Path, log: Path, args: Iterable[str] = (), namespace: str = CA_NAMESPACE) -> None:
        super().__init__(log)
        self.port = free_port()
        self.args = [
            str(ca_binary()), *CA_FLAGS, f"--kubeconfig={kubeconfig}", f"--namespace={namespace}",
            f"--address=127.0.0.1:{self.port}", *args,
        ]  # fmt: skip
        self.env = dict(os.environ, KWOK_PROVIDER_MODE="local", KUBECONFIG=str(kubeconfig), POD_NAMESPACE=namespace)

    def __enter__(self) -> ClusterAutoscaler:
        """Start."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """SIGKILL."""
        self.kill()

    def kill(self) -> None:
        """SIGKILL and reap it (never SIGTERM: see the class docstring)."""
        super().kill()

    def loops(self) -> list[CaLoop]:
        """The completed loops in its log so far (:func:`ca_loops`)."""
        return ca_loops(self.output)

    def wait_loops(self, count: int, timeout: float = 120.0) -> list[CaLoop]:
        """Wait until ``count`` loops are complete (fails early if it exits)."""

        def enough() -> list[CaLoop] | None:
            assert self.alive(), f"cluster-autoscaler exited ({self.proc.returncode if self.proc else None}):\n{self.output[-3000:]}"
            loops = self.loops()
            return loops if len(loops) >= count else None

        result: list[CaLoop] = wait_for(enough, timeout, f"{count} cluster-autoscaler loops", poll=0.5)
        return result

    def metrics_text(self) -> str:
        """Its Prometheus exposition (``""`` while it does not answer)."""
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=10).text
        except httpx.HTTPError:
            return ""

    def samples(self, name: str) -> dict[str, float]:
        """Samples of one metric family member (e.g.
        ``cluster_autoscaler_function_duration_seconds_sum``): label text → value."""
        return prometheus_samples(self.metrics_text(), name)


def prometheus_samples(text: str, name: str) -> dict[str, float]:
    """The samples named ``name`` in a Prometheus text exposition: the label text inside the
    braces (``""`` without labels) → value."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _PROM.match(line)
        if m and m.group(1) == name:
            out[m.group(2) or ""] = float(m.group(3))
    return out


def ca_loops(log: str) -> list[CaLoop]:
    """The completed loops in a cluster-autoscaler log (``--v=4``, klog format): the messages
    between one ``Starting main loop`` and the next (the last, unfinished loop is left out)."""
    loops: list[CaLoop] = []
    current: list[str] | None = None
    for raw in log.splitlines():
        m = _KLOG.match(raw)
        if m is None:
            continue
        line = m.group(1)
        if line.startswith("Starting main loop"):
            if current is not None:
                loops.append(_ca_loop(current))
            current = []
        elif current is not None:
            current.append(line)
    return loops


def _ca_loop(lines: list[str]) -> CaLoop:
    unneeded = set()
    for line in lines:
        m = _UNNEEDED.match(line)
        if m:
            unneeded.add(m.group(1))
    return CaLoop(frozenset(unneeded), tuple(lines))
