"""Machine-type prices for the replay's cost figures: a small bundled table, overridable.

The bundled table (``prices.yaml`` beside this module) holds Compute Engine on-demand prices in
USD per hour for common GKE machine types in us-central1; its header names the source and date.
``--prices FILE`` merges a YAML (or JSON) file over it: either the same layout
(``prices: {machine-type: price}``) or a plain ``machine-type: price`` mapping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

__all__ = ["PriceError", "bundled_prices", "load_prices"]


class PriceError(ValueError):
    """A price file is unreadable or malformed; the message names the file and the entry."""


def _table(doc: Any, where: str) -> dict[str, float]:
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise PriceError(f"{where}: expected a mapping of machine type to USD per hour")
    body = doc.get("prices", doc)
    if not isinstance(body, Mapping):
        raise PriceError(f"{where}: 'prices' must be a mapping of machine type to USD per hour")
    out: dict[str, float] = {}
    for k, v in body.items():
        if k in ("currency", "region") and body is doc:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise PriceError(f"{where}: price of {k!r} must be a number >= 0, got {v!r}")
        out[str(k)] = float(v)
    return out


def bundled_prices() -> dict[str, float]:
    """The bundled table: machine type → USD per hour."""
    text = (resources.files("scaler.replay") / "prices.yaml").read_text(encoding="utf-8")
    return _table(yaml.safe_load(text), "bundled prices.yaml")


def load_prices(path: str | Path | None = None) -> dict[str, float]:
    """The bundled table, with the entries of ``path`` (if given) replacing or adding to it.

    Raises:
        PriceError: the file is unreadable, not YAML, or has a non-numeric or negative price.
    """
    prices = bundled_prices()
    if path is None:
        return prices
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise PriceError(f"{p}: cannot read: {e}") from None
    except yaml.YAMLError as e:
        raise PriceError(f"{p}: invalid YAML: {getattr(e, 'problem', e)}") from None
    prices.update(_table(doc, str(p)))
    return prices
