"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's ``leaderelection`` does.

Only the leader acts; the others wait. The leader renews every ``retry_period`` and steps down
when it could not renew for ``renew_deadline``; a follower takes over once the lease has not been
renewed for ``lease_duration``. On a clean stop the leader releases the lease (empty holder), so
a follower takes over at once.

The kubernetes client's own ``kubernetes.leaderelection`` is not used: it talks through the
global default client rather than ours, cannot be stopped, and never releases the lease.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from kubernetes.client import ApiClient, CoordinationV1Api
from kubernetes.client.exceptions import ApiException

from scaler.kube.raw import read_json, release
from scaler.model.times import format_micro_time, rfc3339_seconds

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)


def _parse(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return rfc3339_seconds(text)
    except ValueError:
        return None


class LeaderElector:
    """Acquire and hold the Lease ``namespace/name`` as ``identity``.

    Args:
        api: the client.
        namespace, name: the Lease.
        identity: this replica (pod name).
        lease_duration, renew_deadline, retry_period: seconds (client-go defaults 15/10/2).
        clock: Unix-seconds clock.
    """

    def __init__(
        self,
        api: ApiClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = CoordinationV1Api(api)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = (
            lease_duration,
            renew_deadline,
            retry_period,
        )
        self.clock = clock
        self._leading = threading.Event()
        self._stop = threading.Event()
        self._last_renew = 0.0
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0

    @property
    def is_leader(self) -> bool:
        """True while this replica holds the lease."""
        return self._leading.is_set()

    def _get(self) -> dict[str, Any] | None:
        try:
            resp = self.api.read_namespaced_lease(self.name, self.namespace, _preload_content=False)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return cast(dict[str, Any], read_json(resp))

    def try_acquire_or_renew(self) -> bool:
        """One attempt to become or stay leader. Returns True when this replica holds the lease."""
        now = self.clock()
        try:
            lease = self._get()
            spec = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "renewTime": format_micro_time(now),
            }
            if lease is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {**spec, "acquireTime": format_micro_time(now), "leaseTransitions": 0},
                }
                release(
                    self.api.create_namespaced_lease(self.namespace, cast(Any, body), _preload_content=False)
                )
                return True
            current = lease.get("spec") or {}
            holder = current.get("holderIdentity") or ""
            observed = (holder, str(current.get("renewTime")))
            if observed != self._observed:
                # Expiry is judged on our own clock from when we saw the record change (client-go).
                self._observed, self._observed_at = observed, now
            duration = float(current.get("leaseDurationSeconds") or self.lease_duration)
            if holder and holder != self.identity and now < self._observed_at + duration:
                return False
            new_spec = {**current, **spec}
            if holder != self.identity:
                new_spec["acquireTime"] = format_micro_time(now)
                new_spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
            lease["spec"] = new_spec
            release(
                self.api.replace_namespaced_lease(
                    self.name, self.namespace, cast(Any, lease), _preload_content=False
                )
            )
            return True
        except ApiException as e:
            if e.status != 409:
                log.warning("lease %s/%s: HTTP %s", self.namespace, self.name, e.status)
            return False
        except Exception as e:  # network errors: not leader this round
            log.warning("lease %s/%s: %s", self.namespace, self.name, e)
            return False

    def run(self, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """Block until :meth:`stop`: follow, acquire, then renew; call ``on_started`` when
        leadership is gained and ``on_stopped`` when it is lost or released."""
        while not self._stop.is_set():
            if self.try_acquire_or_renew():
                self._last_renew = self.clock()
                if not self._leading.is_set():
                    log.info("%s became leader of %s/%s", self.identity, self.namespace, self.name)
                    self._leading.set()
                    on_started()
            elif self._leading.is_set() and self.clock() - self._last_renew > self.renew_deadline:
                log.warning("%s lost leadership of %s/%s", self.identity, self.namespace, self.name)
                self._leading.clear()
                on_stopped()
            self._stop.wait(self.retry_period)
        if self._leading.is_set():
            self._leading.clear()
            on_stopped()
            self.release()

    def stop(self) -> None:
        """Ask :meth:`run` to return (it releases the lease if held)."""
        self._stop.set()

    def release(self) -> None:
        """Give the lease up at once (empty holder, 1 s duration) if this replica holds it."""
        try:
            lease = self._get()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            release(
                self.api.replace_namespaced_lease(
                    self.name, self.namespace, cast(Any, lease), _preload_content=False
                )
            )
        except Exception as e:
            log.warning("releasing lease %s/%s failed: %s", self.namespace, self.name, e)
