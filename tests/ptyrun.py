"""Run the real ``scaler`` command under a pseudo-terminal of a given size (tests only).

The child sees a terminal on stdin, stdout and stderr (``isatty()`` is true, the window size is
``columns`` x ``rows``), as in an interactive shell; ``COLUMNS`` and ``LINES`` are removed from
its environment so that it must ask the terminal. Everything it writes is returned with the
terminal's ``\\r\\n`` line ends turned back into ``\\n``.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_in_pty(
    argv: Sequence[str],
    columns: int,
    rows: int = 50,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
) -> tuple[int, str]:
    """Run ``python -m scaler.cli *argv`` under a ``columns`` x ``rows`` pseudo-terminal.

    Returns the exit status and everything written to the terminal (stdout and stderr mixed).
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    child_env = {k: v for k, v in (env if env is not None else os.environ).items() if k not in ("COLUMNS", "LINES")}
    child_env.setdefault("TERM", "xterm-256color")
    proc = subprocess.Popen(
        [sys.executable, "-m", "scaler.cli", *argv],
        stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=child_env, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError(f"scaler {' '.join(argv)} did not finish in {timeout:.0f}s")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    code = proc.wait(timeout=60)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
