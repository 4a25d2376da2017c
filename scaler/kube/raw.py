"""Raw (``_preload_content=False``) responses of the kubernetes client, read and released.

A raw urllib3 response holds its pooled connection until its body is read; an unread one leaks
the connection, and releasing it unread breaks the next request on it. Every raw response is
therefore read in full, then released, through these two functions.
"""

from __future__ import annotations

import json
from typing import Any, cast

__all__ = ["read_json", "release"]


def release(resp: object) -> bytes:
    """Read the whole body of a raw response, return the connection to its pool, return the body."""
    raw = cast(Any, resp)
    body = cast(bytes, raw.data)
    release_conn = getattr(raw, "release_conn", None)
    if callable(release_conn):
        release_conn()
    return body


def read_json(resp: object) -> Any:
    """The decoded JSON body of a raw response (read and released)."""
    return json.loads(release(resp))
