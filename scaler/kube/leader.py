"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's ``leaderelection`` does,
and the fence every write of the leader passes.

Only the leader acts; the others wait. The leader renews every ``retry_period`` and steps down
when it could not renew for ``renew_deadline``; a follower takes over once the lease has not been
renewed for ``lease_duration`` (measured on its own clock from when it saw the record change).
Every lease request has a client timeout: one attempt (a GET, then a create or update) is given
half the renew deadline, so a request the API server never answers is a failed attempt, not a
hung elector (client-go bounds the renewal with a ``RenewDeadline`` context). On a clean stop
the leader releases the lease (empty holder), so a follower takes over at once. A lease write
answered ``429 Too Many Requests`` with a ``Retry-After`` header fails the attempt, and the
next attempt waits at least that long (:func:`scaler.kube.retry.retry_after`; the GET honours
it in the client); a leader that cannot renew within its renew deadline meanwhile steps down
as usual.

**Fencing** (:meth:`LeaderElector.check`): a write may go out only while the last successful
renewal *began* less than ``renew_deadline`` ago on a monotonic clock that keeps counting while
the process is stopped (``CLOCK_BOOTTIME`` on Linux). A follower cannot take the lease before
``lease_duration`` after that renewal, so a write checked in time reaches the API server before
any other replica may act, provided it travels in less than ``lease_duration - renew_deadline``
(5 s with the defaults). A process paused past its lease (SIGSTOP, a GC pause, a starved CPU, a
VM migration) finds out at its next check, before its next write. The fence is one-way: once a
leader fails a check or loses the lease it never writes again (:class:`LeaseLost`), and the
process exits so that it restarts clean, as cluster-autoscaler does (``OnStoppedLeading`` →
``klog.Fatalf``).

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

from scaler.errors import ScalerError
from scaler.kube.raw import read_json, release
from scaler.kube.retry import retry_after
from scaler.model.times import format_micro_time, rfc3339_seconds

__all__ = ["LeaderElector", "LeaseLost", "fence_clock"]

log = logging.getLogger(__name__)


class LeaseLost(ScalerError):
    """This replica does not hold the lease now (or has lost it for good): it must make no
    write, not even a rollback; the new leader's recovery owns what it left."""


def fence_clock() -> float:
    """Seconds on a monotonic clock that also counts time the machine was suspended
    (``CLOCK_BOOTTIME`` where the platform has it, else ``time.monotonic``)."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


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
        clock: Unix-seconds clock (the lease's times).
        monotonic: the fence's clock, seconds (default :func:`fence_clock`).
        attempt_timeout: seconds one acquire-or-renew attempt may take in all, its requests'
            client timeouts (default half of ``renew_deadline``; must be shorter than it).

    Raises:
        ValueError: ``attempt_timeout`` is not shorter than ``renew_deadline``, or
            ``renew_deadline`` not shorter than ``lease_duration``.
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
        monotonic: Callable[[], float] = fence_clock,
        attempt_timeout: float | None = None,
    ) -> None:
        if not 0 < renew_deadline < lease_duration:
            raise ValueError(
                f"renew deadline {renew_deadline:g}s must be shorter than the lease duration {lease_duration:g}s"
            )
        attempt_timeout = renew_deadline / 2 if attempt_timeout is None else attempt_timeout
        if not 0 < attempt_timeout < renew_deadline:
            raise ValueError(
                f"lease attempt timeout {attempt_timeout:g}s must be shorter than the renew deadline {renew_deadline:g}s"
            )
        self.api = CoordinationV1Api(api)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = (
            lease_duration,
            renew_deadline,
            retry_period,
        )
        self.clock = clock
        self.monotonic = monotonic
        self.attempt_timeout = attempt_timeout
        self._leading = threading.Event()
        self._stop = threading.Event()
        self._lost = threading.Event()  # one-way: set once leadership was lost
        self._renewed_at = 0.0  # fence clock: when the last successful attempt began
        self._attempt_deadline = 0.0  # fence clock: when the current attempt's time is up
        self._retry_at = 0.0  # fence clock: no attempt before (a 429's Retry-After)
        self._on_stopped: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0

    @property
    def is_leader(self) -> bool:
        """True while this replica holds the lease."""
        return self._leading.is_set()

    @property
    def lost(self) -> bool:
        """True once this replica led and lost the lease (for good: it never writes again)."""
        return self._lost.is_set()

    def holds_lease(self) -> bool:
        """True when this replica leads, has not lost the lease, and its last successful
        renewal began less than ``renew_deadline`` ago on the fence clock."""
        return (
            self._leading.is_set()
            and not self._lost.is_set()
            and self.monotonic() - self._renewed_at < self.renew_deadline
        )

    def check(self) -> None:
        """The fence: return when this replica may write now, else raise.

        A leader whose last successful renewal is older than ``renew_deadline`` has lost the
        lease from this moment on (it is not given back by a later renewal): ``on_stopped`` of
        :meth:`run` is called once, from the calling thread.

        Raises:
            LeaseLost: this replica does not hold the lease now.
        """
        if self.holds_lease():
            return
        if self._leading.is_set() or self._lost.is_set():
            age = self.monotonic() - self._renewed_at
            self._lose(f"last renewal began {age:.1f}s ago (renew deadline {self.renew_deadline:g}s)")
            raise LeaseLost(
                f"{self.identity} no longer holds lease {self.namespace}/{self.name}: "
                f"last renewal began {age:.1f}s ago, renew deadline {self.renew_deadline:g}s"
            )
        raise LeaseLost(f"{self.identity} does not hold lease {self.namespace}/{self.name}")

    def _lose(self, why: str) -> None:
        """Leadership is lost for good: clear it and call ``on_stopped`` once."""
        with self._lock:
            if self._lost.is_set():
                return
            self._lost.set()
            was_leading = self._leading.is_set()
            self._leading.clear()
            callback = self._on_stopped
        if was_leading:
            log.warning("%s lost leadership of %s/%s: %s", self.identity, self.namespace, self.name, why)
            if callback is not None:
                callback()

    def _timeout(self) -> float:
        """The client timeout of the next request of this attempt (seconds, at least 0.05)."""
        return max(0.05, self._attempt_deadline - self.monotonic())

    def _get(self) -> dict[str, Any] | None:
        try:
            resp = self.api.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=self._timeout()
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return cast(dict[str, Any], read_json(resp))

    def try_acquire_or_renew(self) -> bool:
        """One attempt to become or stay leader, its requests bounded together by
        ``attempt_timeout`` (a request that times out fails the attempt). Returns True when
        this replica holds the lease; then the fence counts from when the attempt began."""
        began = self.monotonic()
        self._attempt_deadline = began + self.attempt_timeout
        if self._try(began):
            self._renewed_at = began
            return True
        return False

    def _try(self, began: float) -> bool:
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
                    self.api.create_namespaced_lease(
                        self.namespace,
                        cast(Any, body),
                        _preload_content=False,
                        _request_timeout=self._timeout(),
                    )
                )
                return True
            current = lease.get("spec") or {}
            holder = current.get("holderIdentity") or ""
            observed = (holder, str(current.get("renewTime")))
            if observed != self._observed:
                # Expiry is judged on our own clock from when we saw the record change (client-go).
                self._observed, self._observed_at = observed, began
            duration = float(current.get("leaseDurationSeconds") or self.lease_duration)
            if holder and holder != self.identity and began < self._observed_at + duration:
                if self._leading.is_set():  # another replica holds it: ours is gone, whatever the deadline
                    self._lose(f"the lease is held by {holder}")
                return False
            if self._lost.is_set():
                return False  # one-way: a replica that lost the lease never takes it again
            new_spec = {**current, **spec}
            if holder != self.identity:
                new_spec["acquireTime"] = format_micro_time(now)
                new_spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
            lease["spec"] = new_spec
            release(
                self.api.replace_namespaced_lease(
                    self.name, self.namespace, cast(Any, lease), _preload_content=False,
                    _request_timeout=self._timeout(),
                )
            )  # fmt: skip
            return True
        except ApiException as e:
            wait = retry_after(e)
            if wait is not None:
                self._retry_at = self.monotonic() + wait
                log.warning("lease %s/%s: HTTP 429; next attempt in %gs as its Retry-After asks",
                            self.namespace, self.name, wait)  # fmt: skip
            elif e.status != 409:
                log.warning("lease %s/%s: HTTP %s", self.namespace, self.name, e.status)
            return False
        except Exception as e:  # network errors and timeouts: not leader this round
            log.warning("lease %s/%s: %s", self.namespace, self.name, e)
            return False

    def run(self, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """Block until :meth:`stop` or until leadership is lost: follow, acquire, then renew;
        call ``on_started`` when leadership is gained and ``on_stopped`` when it is lost (a
        renewal failing for ``renew_deadline``, another holder seen, or a failed :meth:`check`
        in another thread) or released on :meth:`stop`. A replica that lost the lease does not
        try again: its process is expected to exit."""
        while not self._stop.is_set() and not self._lost.is_set():
            self.tick(on_started, on_stopped)
            self._stop.wait(self.retry_period)
        with self._lock:
            leading = self._leading.is_set() and not self._lost.is_set()
            self._leading.clear()
        if leading:
            on_stopped()
            self.release()

    def tick(self, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """One round of :meth:`run`, without its wait: one acquire-or-renew attempt, then
        ``on_started`` if leadership was gained, or ``on_stopped`` if it is lost now."""
        self._on_stopped = on_stopped
        if self._lost.is_set():
            return
        if self.monotonic() < self._retry_at:  # the server asked to wait (Retry-After)
            if self._leading.is_set() and self.monotonic() - self._renewed_at >= self.renew_deadline:
                self._lose(f"no renewal for {self.monotonic() - self._renewed_at:.1f}s")
            return
        if self.try_acquire_or_renew() and not self._lost.is_set():
            if not self._leading.is_set():
                log.info("%s became leader of %s/%s", self.identity, self.namespace, self.name)
                self._leading.set()
                on_started()
        elif self._leading.is_set() and self.monotonic() - self._renewed_at >= self.renew_deadline:
            self._lose(f"no renewal for {self.monotonic() - self._renewed_at:.1f}s")

    def stop(self) -> None:
        """Ask :meth:`run` to return (it releases the lease if held)."""
        self._stop.set()

    def release(self) -> None:
        """Give the lease up at once (empty holder, 1 s duration) if this replica holds it."""
        self._attempt_deadline = self.monotonic() + self.attempt_timeout
        try:
            lease = self._get()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            release(
                self.api.replace_namespaced_lease(
                    self.name, self.namespace, cast(Any, lease), _preload_content=False,
                    _request_timeout=self._timeout(),
                )
            )  # fmt: skip
        except Exception as e:
            log.warning("releasing lease %s/%s failed: %s", self.namespace, self.name, e)
