"""The one free-port helper of the test suite, for what cannot bind port 0 itself.

A server the tests own binds port 0 and reports the port the OS gave it: the loopback fakes
(:class:`fakes.loopback.LoopbackServer`), :class:`realk8s.MetricsServer`, ``scaler run
--address=127.0.0.1:0`` (its log names the port). Nothing here is needed for those, and nothing
can race for their port.
"""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (bound to port 0, then released).

    Two uses only: the port of an external process that must be told its port up front, because
    it cannot bind port 0 and report the port it got (cluster-autoscaler's ``--address``,
    Prometheus's ``--web.listen-address``, the ports of ``ray start``); and the address of a
    server that is down (nothing listens there). Another process may take the port between its
    release and its use: rare on loopback, and the external process then fails to start, loudly.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
