"""The GCE/GKE metadata server: which project, cluster and location scaler runs in.

Reads ``http://metadata.google.internal/computeMetadata/v1/<path>`` with the header
``Metadata-Flavor: Google`` (the host is overridable by the environment variable
``GCE_METADATA_HOST``, or the older ``GCE_METADATA_ROOT``, as Google's client libraries allow).
On GKE with Workload Identity the GKE metadata server answers the same paths. A response
without ``Metadata-Flavor: Google`` is not from a metadata server and is refused.
"""

from __future__ import annotations

import logging
import os

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_fixed

from scaler.errors import ScalerError

__all__ = [
    "DEFAULT_METADATA_HOST",
    "METADATA_HOST_ENV",
    "MetadataUnavailable",
    "cluster_location",
    "cluster_name",
    "get_metadata",
    "metadata_host",
    "project_id",
]

log = logging.getLogger(__name__)

DEFAULT_METADATA_HOST = "metadata.google.internal"
"""The metadata server's host name on GCE and GKE."""
METADATA_HOST_ENV = "GCE_METADATA_HOST"
"""Environment variable naming ``host[:port]`` of the metadata server (as google-auth reads it)."""
_METADATA_ROOT_ENV = "GCE_METADATA_ROOT"  # google-auth's older name for the same setting


class MetadataUnavailable(ScalerError):
    """The metadata server could not be reached, refused, or lacks the value (the message names
    the URL and the cause). Outside GCE/GKE, pass project, location and cluster explicitly."""


class _Transient(Exception):
    """A failure worth another attempt (connection error, timeout, 5xx)."""


def metadata_host() -> str:
    """``host[:port]`` of the metadata server: ``$GCE_METADATA_HOST``, else
    ``$GCE_METADATA_ROOT``, else ``metadata.google.internal`` (read at every call)."""
    return os.environ.get(METADATA_HOST_ENV) or os.environ.get(_METADATA_ROOT_ENV) or DEFAULT_METADATA_HOST


def get_metadata(
    path: str, *, timeout_seconds: float = 3.0, attempts: int = 3, retry_wait_seconds: float = 0.2
) -> str:
    """GET ``/computeMetadata/v1/<path>`` and return the body, stripped.

    Connection errors, timeouts and 5xx answers are tried ``attempts`` times, ``retry_wait_seconds``
    apart; each request has ``timeout_seconds``. Proxies from the environment are not used (the
    metadata server is link-local).

    Raises:
        MetadataUnavailable: unreachable after the attempts, a non-200 answer, or an answer
            without ``Metadata-Flavor: Google``.
    """
    url = f"http://{metadata_host()}/computeMetadata/v1/{path.lstrip('/')}"

    def fetch() -> str:
        try:
            with httpx.Client(timeout=timeout_seconds, trust_env=False) as client:
                resp = client.get(url, headers={"Metadata-Flavor": "Google"})
        except httpx.HTTPError as e:
            raise _Transient(f"{url}: {type(e).__name__}: {e}") from e
        if resp.status_code >= 500:
            raise _Transient(f"{url}: HTTP {resp.status_code}")
        if resp.status_code != 200:
            raise MetadataUnavailable(f"{url}: HTTP {resp.status_code}")
        if resp.headers.get("Metadata-Flavor") != "Google":
            raise MetadataUnavailable(f"{url}: answer lacks the Metadata-Flavor: Google header")
        return resp.text.strip()

    retrying = Retrying(
        stop=stop_after_attempt(max(1, attempts)),
        wait=wait_fixed(retry_wait_seconds),
        retry=retry_if_exception_type(_Transient),
        reraise=True,
    )
    try:
        value = retrying(fetch)
    except _Transient as e:
        raise MetadataUnavailable(f"metadata server unavailable: {e}") from e
    if not value:
        raise MetadataUnavailable(f"{url}: empty value")
    return value


def project_id(*, timeout_seconds: float = 3.0, attempts: int = 3, retry_wait_seconds: float = 0.2) -> str:
    """The project id (``project/project-id``). The keyword arguments are :func:`get_metadata`'s.

    Raises:
        MetadataUnavailable: see :func:`get_metadata`.
    """
    return get_metadata(
        "project/project-id",
        timeout_seconds=timeout_seconds,
        attempts=attempts,
        retry_wait_seconds=retry_wait_seconds,
    )


def cluster_name(*, timeout_seconds: float = 3.0, attempts: int = 3, retry_wait_seconds: float = 0.2) -> str:
    """The GKE cluster name (``instance/attributes/cluster-name``).

    Raises:
        MetadataUnavailable: see :func:`get_metadata`.
    """
    return get_metadata(
        "instance/attributes/cluster-name",
        timeout_seconds=timeout_seconds,
        attempts=attempts,
        retry_wait_seconds=retry_wait_seconds,
    )


def cluster_location(
    *, timeout_seconds: float = 3.0, attempts: int = 3, retry_wait_seconds: float = 0.2
) -> str:
    """The GKE cluster location (``instance/attributes/cluster-location``): a region for a
    regional cluster, a zone for a zonal one.

    Raises:
        MetadataUnavailable: see :func:`get_metadata`.
    """
    return get_metadata(
        "instance/attributes/cluster-location",
        timeout_seconds=timeout_seconds,
        attempts=attempts,
        retry_wait_seconds=retry_wait_seconds,
    )
