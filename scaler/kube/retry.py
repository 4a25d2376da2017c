"""A ``429 Too Many Requests`` answer's ``Retry-After``, honoured as client-go honours it.

An API server with API Priority and Fairness answers a request it sheds with ``429 Too Many
Requests`` and a ``Retry-After`` header (whole seconds): the client is to wait that long before
asking again. :func:`retry_after` reads the delay; :func:`honour_retry_after` makes one request
again after it, calling a check (the lease fence of a write) before every attempt. Reads honour
it in the client itself (:func:`scaler.kube.client.make_api_client`). Source: client-go
``rest/with_retry.go``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from kubernetes.client.exceptions import ApiException
from kubernetes.utils import retry_after_seconds

__all__ = ["RETRY_AFTER_ATTEMPTS", "RETRY_AFTER_MAX_SECONDS", "honour_retry_after", "retry_after"]

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_AFTER_ATTEMPTS = 4
"""Attempts of one request answered 429 with a ``Retry-After`` header: the first and three
retries, as many as urllib3's default retries (and the ceiling the ``kubernetes`` client's
client-go retries take from them)."""

RETRY_AFTER_MAX_SECONDS = 30.0
"""The longest wait one ``Retry-After`` header can impose (seconds); a longer one is cut to it
(API Priority and Fairness asks for a few seconds)."""


def retry_after(error: BaseException) -> float | None:
    """The seconds a ``429 Too Many Requests`` answer asks the client to wait before it asks
    again: its ``Retry-After`` header (whole seconds, as client-go reads it: the ``kubernetes``
    client's :func:`~kubernetes.utils.retry.retry_after_seconds`), at most
    :data:`RETRY_AFTER_MAX_SECONDS`. ``None`` for any other error, and for a 429 without the
    header: a PodDisruptionBudget's refusal of an eviction is a 429 without one, left to the
    eviction's own retries."""
    if getattr(error, "status", None) != 429:
        return None
    seconds = retry_after_seconds(error)  # type: ignore[arg-type]  # any error with .headers
    return None if seconds is None else min(float(seconds), RETRY_AFTER_MAX_SECONDS)


def honour_retry_after(
    send: Callable[[], T],
    *,
    what: str,
    before: Callable[[], None] | None = None,
    attempts: int = RETRY_AFTER_ATTEMPTS,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Make one API request (``send``), again after the answer's ``Retry-After`` delay while it
    is a 429 that carries one (:func:`retry_after`), at most ``attempts`` times in all. Source:
    client-go ``rest/with_retry.go`` (``Retry-After`` honoured for every verb).

    Args:
        send: makes the request; raises ``ApiException`` on an HTTP error.
        what: the call and its object, for the log line of each wait (``patch node n1``).
        before: called before every attempt, the first included: the lease fence of a write
            (:meth:`scaler.kube.leader.LeaderElector.check`), so that no retry goes out after
            the wait without being fenced again.
        attempts: the most attempts (>= 1).
        sleep: the wait (seconds).

    Returns:
        What ``send`` returned.

    Raises:
        ApiException: any other error at once, and the last 429 once ``attempts`` are spent.
        Exception: whatever ``before`` raises (``LeaseLost``), before the request is sent.
    """
    for attempt in range(1, max(1, attempts) + 1):
        if before is not None:
            before()
        try:
            return send()
        except ApiException as e:
            delay = retry_after(e)
            if delay is None or attempt >= attempts:
                raise
        log.info("%s: HTTP 429 Too Many Requests; retrying in %gs as its Retry-After asks", what, delay)
        sleep(delay)
    raise AssertionError("unreachable")  # the loop returns or raises
