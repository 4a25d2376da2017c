"""Logging set-up of ``scaler run``: text or one JSON object per line, on stderr."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

__all__ = ["JsonFormatter", "configure_logging"]


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: time, level, logger, message, and any ``extra`` fields."""

    _skip = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for k, v in record.__dict__.items():
            if k not in self._skip:
                out[k] = v
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(fmt: str, level: int = logging.INFO) -> None:
    """Log to stderr as ``text`` or ``json``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))  # fmt: skip
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
