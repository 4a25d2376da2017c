"""A 429's ``Retry-After`` (API Priority and Fairness shedding load) is honoured by every kind of
Kubernetes call scaler makes, against the loopback API server (real HTTP through the
``kubernetes`` client, the 429s injected by the server): reads in the client itself, writes
through :func:`scaler.kube.retry.honour_retry_after` with the lease fence checked again before
each retry, the lease's own writes by the elector's next attempt, the permission check. A
PodDisruptionBudget's 429 (no ``Retry-After``) is left to the eviction's own retries. The watch
cache's case is in ``test_watch.py``, the ``kubernetes`` provider's delete in
``test_cloud_kubernetes.py``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import OBJECT_NAMESPACE, Sleeps, make_pod, node_object, pod_object
from fakes.kube_api import FakeKubeAPI
from kubernetes.client.exceptions import ApiException

from scaler.kube.client import make_api_client
from scaler.kube.leader import LeaderElector, LeaseLost
from scaler.kube.permissions import Permission, missing_permissions
from scaler.kube.retry import RETRY_AFTER_MAX_SECONDS, honour_retry_after, retry_after
from scaler.kube.writer import KubeWriter

NOW = 1_780_000_000.0
APF = {"Retry-After": "2"}  # what API Priority and Fairness sends with a 429 (whole seconds)
LEASES = "/apis/coordination.k8s.io/v1/namespaces/scaler-system/leases"


@pytest.fixture
def fake(no_proxy: None) -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        server.grace_scale = 0.0
        server.load_objects([node_object("n1"), pod_object("web-1")])
        yield server


def writer(api: Any, sleeps: Sleeps, **kw: Any) -> KubeWriter:
    return KubeWriter(api, "scaler", clock=lambda: NOW, sleep=sleeps, replica="a_1", **kw)


def test_retry_after_reads_a_429s_header_only() -> None:
    def error(status: int, headers: dict[str, str]) -> ApiException:
        e = ApiException(status=status, reason="x")
        e.headers = headers
        return e

    assert retry_after(error(429, {"Retry-After": "3"})) == 3.0
    assert retry_after(error(429, {"retry-after": "3600"})) == RETRY_AFTER_MAX_SECONDS
    assert retry_after(error(429, {})) is None  # a PDB's refusal of an eviction
    assert retry_after(error(503, {"Retry-After": "3"})) is None
    assert retry_after(error(429, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) is None  # as client-go


def test_honour_retry_after_fences_every_attempt_and_stops_after_its_attempts() -> None:
    fenced: list[int] = []
    sleeps = Sleeps()

    def send() -> str:
        e = ApiException(status=429, reason="Too Many Requests")
        e.headers = {"Retry-After": "1"}
        if len(fenced) < 3:
            raise e
        return "ok"

    assert honour_retry_after(send, what="x", before=lambda: fenced.append(1), sleep=sleeps) == "ok"
    assert (len(fenced), sleeps.waits) == (3, [1.0, 1.0])
    fenced.clear()
    with pytest.raises(ApiException):
        honour_retry_after(send, what="x", before=lambda: fenced.append(1), sleep=sleeps, attempts=2)


def test_a_read_waits_the_retry_after_in_the_client(fake: FakeKubeAPI, api: Any) -> None:
    """GETs honour it in the ``kubernetes`` client (client-go retries): the node read answered
    429 once is read again a second later, and answers."""
    fake.fail("/api/v1/nodes/n1", 429, times=1, headers={"Retry-After": "1"})
    w = writer(api, Sleeps())
    start = time.monotonic()
    assert w.get_node("n1") is not None
    assert time.monotonic() - start >= 1.0
    reads = fake.requests_to("/api/v1/nodes/n1")
    assert len(reads) == 2 and reads[1].received - reads[0].received >= 1.0


def test_a_taint_shed_by_apf_is_sent_again_after_its_retry_after_fenced_again(
    fake: FakeKubeAPI, api: Any
) -> None:
    fake.fail("/api/v1/nodes/n1", 429, times=1, method="PATCH", headers=APF)
    checks: list[float] = []
    sleeps = Sleeps()
    w = writer(api, sleeps, fence=lambda: checks.append(time.monotonic()))
    w.mark_to_be_deleted("n1", NOW)
    assert len(fake.requests_to("/api/v1/nodes/n1", "PATCH")) == 2
    assert sleeps.waits == [2.0] and len(checks) == 2  # the fence checked before each attempt


def test_a_retry_after_a_lost_lease_is_not_sent(fake: FakeKubeAPI, api: Any) -> None:
    """The lease is lost during the Retry-After wait: the fence refuses the retry, nothing more
    is sent."""
    fake.fail("/api/v1/nodes/n1", 429, times=1, method="PATCH", headers=APF)
    calls: list[int] = []

    def fence() -> None:
        calls.append(1)
        if len(calls) > 1:
            raise LeaseLost("lease held by b_2")

    with pytest.raises(LeaseLost):
        writer(api, Sleeps(), fence=fence).mark_to_be_deleted("n1", NOW)
    assert len(fake.requests_to("/api/v1/nodes/n1", "PATCH")) == 1


def test_an_eviction_shed_by_apf_waits_its_retry_after_a_pdbs_429_does_not(
    fake: FakeKubeAPI, api: Any
) -> None:
    path = f"/api/v1/namespaces/{OBJECT_NAMESPACE}/pods/web-1/eviction"
    pod = make_pod("web-1", namespace=OBJECT_NAMESPACE, uid="uid-web-1")
    sleeps = Sleeps()
    w = writer(api, sleeps)
    fake.fail(path, 429, times=1, method="POST")  # a PDB: no Retry-After
    ok, status, _ = w.evict_once(pod, 30)
    assert (ok, status, sleeps.waits) == (False, 429, [])
    fake.fail(path, 429, times=1, method="POST", headers=APF)
    assert w.evict_once(pod, 30)[0]
    assert sleeps.waits == [2.0] and len(fake.requests_to(path, "POST")) == 3


def test_events_and_the_status_configmap_honour_it(fake: FakeKubeAPI, api: Any) -> None:
    from scaler.kube.writer import ObjectRef

    sleeps = Sleeps()
    w = writer(api, sleeps)
    fake.fail("/api/v1/namespaces/default/events", 429, times=1, method="POST", headers=APF)
    w.event(ObjectRef("Node", "n1"), "Normal", "ScaleDown", "x")
    assert len(fake.events()) == 1
    fake.fail("/api/v1/namespaces/scaler-system/configmaps", 429, times=1, method="POST", headers=APF)
    w.write_config_map("scaler-system", "scaler-status", {"status": "x"}, {})
    assert fake.get_object("ConfigMap", "scaler-status", "scaler-system") is not None
    assert sleeps.waits == [2.0, 2.0]


def test_a_lease_write_shed_by_apf_delays_the_next_attempt(tmp_path: Path, fake: FakeKubeAPI) -> None:
    """The elector's create answered 429 ``Retry-After: 2``: no attempt before 2 s have passed on
    its clock, then it acquires. urllib3 does not resend the write by itself."""
    api = make_api_client(str(fake.write_kubeconfig(tmp_path / "kubeconfig")))
    now = [100.0]
    e = LeaderElector(api, "scaler-system", "scaler", "a_1", monotonic=lambda: now[0])
    fake.fail(LEASES, 429, times=1, method="POST", headers=APF)
    started: list[int] = []
    e.tick(lambda: started.append(1), lambda: None)
    assert started == [] and len(fake.requests_to(LEASES, "POST")) == 1
    now[0] += 1.0
    e.tick(lambda: started.append(1), lambda: None)
    assert len(fake.requests_to(LEASES, "POST")) == 1  # still waiting
    now[0] += 1.5
    e.tick(lambda: started.append(1), lambda: None)
    assert started == [1] and len(fake.requests_to(LEASES, "POST")) == 2


def test_a_put_is_never_resent_by_urllib3_past_the_fence(tmp_path: Path, fake: FakeKubeAPI) -> None:
    """urllib3's default retries resend PUT and DELETE after a 429's Retry-After by themselves,
    after the fence was checked: the clients scaler builds turn that off."""
    api = make_api_client(str(fake.write_kubeconfig(tmp_path / "kubeconfig")))
    now = [100.0]
    e = LeaderElector(api, "scaler-system", "scaler", "a_1", monotonic=lambda: now[0])
    e.tick(lambda: None, lambda: None)
    fake.fail(f"{LEASES}/scaler", 429, method="PUT", headers={"Retry-After": "1"})
    now[0] += 1.0
    e.tick(lambda: None, lambda: None)
    assert len(fake.requests_to(f"{LEASES}/scaler", "PUT")) == 1


def test_the_permission_check_honours_it(fake: FakeKubeAPI, api: Any) -> None:
    from scaler.kube.client import READ_CALLS

    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    fake.fail(path, 429, times=1, method="POST", headers={"Retry-After": "1"})
    assert missing_permissions(api, [Permission(READ_CALLS[0])]) == []
    assert len(fake.requests_to(path, "POST")) == 2
