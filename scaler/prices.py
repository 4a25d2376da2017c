"""Machine-type prices: what a node costs, for the replay's cost figures and the savings of the
dry-run report and the status ConfigMap. A small bundled table, overridable.

The bundled table (``prices.yaml`` beside this module) holds Compute Engine on-demand prices in
USD per hour for common GKE machine types in us-central1; its ``source`` and ``date`` keys name
where they come from. ``--prices FILE`` merges a YAML (or JSON) file over it, in either layout:

* the bundled one: optional ``source``, ``date``, ``currency`` (USD) and ``region``;
  ``prices: {machine-type: USD/h}`` (on-demand) and ``spot: {machine-type: USD/h}`` (Spot VMs);
  and ``regions: {REGION: {prices: {...}, spot: {...}}}`` for more regions. Without ``region``,
  the top-level ``prices`` and ``spot`` apply to every region;
* a plain ``machine-type: USD/h`` mapping: on-demand, every region.

A file's entry replaces the bundled price of the same machine type, region and kind; a
region-less entry replaces it in every region. A node's price (:meth:`PriceTable.node_price`) is
looked up by its ``node.kubernetes.io/instance-type``, its region (``topology.kubernetes.io/region``,
else its zone without the last ``-x``) and its kind: Spot when it carries
``cloud.google.com/gke-spot=true`` or ``cloud.google.com/gke-preemptible=true`` (preemptible VMs
are billed at Spot prices), else on-demand. A Spot node is never priced at the on-demand rate:
with no Spot price its price is unknown (``None``), never 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from scaler.errors import InputError
from scaler.model.records import Node

__all__ = [
    "HOURS_PER_MONTH",
    "NodePrice",
    "PriceError",
    "PriceTable",
    "bundled_prices",
    "load_price_table",
    "load_prices",
]

HOURS_PER_MONTH = 730.0
"""Hours in a month as Google Cloud's pricing pages and calculator count them (365 × 24 / 12)."""

BUNDLED_REGION = "us-central1"
"""The region of the bundled table, and of the replay's prices."""

LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
_LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
_LABEL_REGION = "topology.kubernetes.io/region"
_LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
LABEL_SPOT = "cloud.google.com/gke-spot"
LABEL_PREEMPTIBLE = "cloud.google.com/gke-preemptible"

Kind = Literal["on-demand", "spot"]
_SECTIONS: tuple[tuple[str, Kind], ...] = (("prices", "on-demand"), ("spot", "spot"))
_META = ("source", "date", "currency", "region", "regions")


class PriceError(InputError, ValueError):
    """A price file is unreadable or malformed; the message names the file and the entry."""


@dataclass(frozen=True, slots=True)
class NodePrice:
    """What one node costs: its machine type, region and kind (``on-demand`` or ``spot``), and
    its price in USD per hour (``None``: unknown, no entry in the table)."""

    machine_type: str
    region: str
    kind: Kind
    hourly_usd: float | None
    origin: str = ""  # "file" (--prices) or "bundled": which table the price came from; "" unknown

    @property
    def monthly_usd(self) -> float | None:
        """USD per month (:data:`HOURS_PER_MONTH` hours), ``None`` when unknown."""
        return None if self.hourly_usd is None else self.hourly_usd * HOURS_PER_MONTH


@dataclass(slots=True)
class PriceTable:
    """Prices in USD per hour by (region, kind, machine type); region ``""`` is any region.

    Attributes:
        source: where the prices come from (the bundled table's source and date, plus any file).
        date: the date (or period) of the prices, as the table says it.
        entries: ``(region, kind, machine type) → USD per hour``.
        origins: ``(region, kind, machine type) → "file"`` for the entries a ``--prices`` file
            set (the others are the bundled table's).
        bundled_source, bundled_date: the bundled table's own ``source`` and ``date``.
        file_source, file_date: the ``--prices`` file's ``source`` (else its file name) and
            ``date`` (else the bundled date); empty without a file.
    """

    source: str = ""
    date: str = ""
    entries: dict[tuple[str, Kind, str], float] = field(default_factory=dict)
    origins: dict[tuple[str, Kind, str], str] = field(default_factory=dict)
    bundled_source: str = ""
    bundled_date: str = ""
    file_source: str = ""
    file_date: str = ""

    def attribution(self, origins: Iterable[str]) -> tuple[str, str]:
        """``(source, date)`` naming where prices of the given :attr:`NodePrice.origin` values
        come from: the file's source and date, the bundled table's, or both when nodes were
        priced from each (a file that prices some machine types leaves the others to the
        bundled table); the table's :attr:`source` and :attr:`date` when none is known."""
        used = {o for o in origins if o}
        if used == {"file", "bundled"}:
            return (
                f"{self.file_source}, {self.file_date}, and for the machine types it does not price "
                f"{self.bundled_source}",
                self.bundled_date,
            )
        if used == {"bundled"} and self.bundled_source:
            return self.bundled_source, self.bundled_date
        return self.source, self.date

    def hourly(self, machine_type: str, region: str, kind: Kind) -> float | None:
        """USD per hour of a machine type in a region, or ``None`` when the table has none."""
        return self._lookup(machine_type, region, kind)[0]

    def _lookup(self, machine_type: str, region: str, kind: Kind) -> tuple[float | None, str]:
        """(USD per hour, origin) of a machine type in a region; ``(None, "")`` without one."""
        key = (region, kind, machine_type)
        price = self.entries.get(key)
        if price is None:
            key = ("", kind, machine_type)
            price = self.entries.get(key)
        return (None, "") if price is None else (price, self.origins.get(key, "bundled"))

    def node_price(self, node: Node) -> NodePrice:
        """The price of ``node`` from its labels (see the module docstring)."""
        labels = node.labels
        machine = labels.get(LABEL_INSTANCE_TYPE) or labels.get(_LABEL_INSTANCE_TYPE_BETA, "")
        region = labels.get(_LABEL_REGION) or labels.get(_LABEL_REGION_BETA, "")
        if not region and node.zone.count("-") >= 2:
            region = node.zone.rsplit("-", 1)[0]
        spot = labels.get(LABEL_SPOT) == "true" or labels.get(LABEL_PREEMPTIBLE) == "true"
        kind: Kind = "spot" if spot else "on-demand"
        hourly, origin = self._lookup(machine, region, kind) if machine else (None, "")
        return NodePrice(machine, region, kind, hourly, origin)

    def on_demand(self, region: str = BUNDLED_REGION) -> dict[str, float]:
        """Machine type → on-demand USD per hour in ``region`` (the replay's flat table)."""
        types = {t for (_, k, t) in self.entries if k == "on-demand"}
        out = {t: self.hourly(t, region, "on-demand") for t in types}
        return {t: p for t, p in sorted(out.items()) if p is not None}

    def merge(self, doc: Any, where: str, origin: str = "file") -> None:
        """Add the entries of a parsed price file ``doc`` (see the module docstring), recording
        ``origin`` (``"file"`` or ``"bundled"``) for each in :attr:`origins`.

        Raises:
            PriceError: a malformed layout or price (names ``where`` and the entry).
        """
        if doc is None:
            return
        if not isinstance(doc, Mapping):
            raise PriceError(f"{where}: expected a mapping of machine type to USD per hour")
        if not any(k in doc for k in (*_META, "prices", "spot")):
            self._add("", "on-demand", doc, where, origin)  # plain machine-type: price
            return
        unknown = set(doc) - {*_META, "prices", "spot"}
        if unknown:
            raise PriceError(
                f"{where}: unknown key {sorted(map(str, unknown))[0]!r} (machine types go under 'prices' or 'spot')"
            )
        region = doc.get("region", "")
        if not isinstance(region, str):
            raise PriceError(f"{where}: region must be a region name, got {region!r}")
        for section, kind in _SECTIONS:
            self._add(region, kind, doc.get(section), f"{where}: {section}", origin)
        regions = doc.get("regions") or {}
        if not isinstance(regions, Mapping):
            raise PriceError(f"{where}: 'regions' must map region names to {{prices, spot}}")
        for name, body in regions.items():
            if not isinstance(body, Mapping) or set(body) - {"prices", "spot"}:
                raise PriceError(f"{where}: regions.{name} must hold only 'prices' and 'spot' mappings")
            for section, kind in _SECTIONS:
                self._add(str(name), kind, body.get(section), f"{where}: regions.{name}.{section}", origin)
        currency = doc.get("currency", "USD")
        if currency != "USD":
            raise PriceError(f"{where}: prices must be in USD, got currency {currency!r}")

    def _add(self, region: str, kind: Kind, body: Any, where: str, origin: str) -> None:
        if body is None:
            return
        if not isinstance(body, Mapping):
            raise PriceError(f"{where}: expected a mapping of machine type to USD per hour")
        for k, v in body.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise PriceError(f"{where}: price of {k!r} must be a number >= 0, got {v!r}")
            machine = str(k)
            if not region:  # an every-region price replaces this type's price in each region
                for key in [key for key in self.entries if key[1] == kind and key[2] == machine]:
                    self.entries[key] = float(v)
                    self.origins[key] = origin
            self.entries[(region, kind, machine)] = float(v)
            self.origins[(region, kind, machine)] = origin


def _read(path: Path) -> Any:
    try:
        # libyaml's parser when installed: the same safe load, and a nesting limit of its own
        return yaml.load(
            path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
    except (OSError, UnicodeDecodeError) as e:
        raise PriceError(f"{path}: cannot read: {e}") from None
    except yaml.YAMLError as e:
        raise PriceError(f"{path}: invalid YAML: {getattr(e, 'problem', e)}") from None
    except RecursionError:
        raise PriceError(
            f"{path}: invalid YAML: nested too deeply (deeper than the parser's recursion limit)"
        ) from None


def load_price_table(path: str | Path | None = None) -> PriceTable:
    """The bundled table, with the entries of ``path`` (if given) replacing or adding to it.
    ``source`` names the bundled table's source and the file; ``date`` is the file's ``date``
    if it has one, else the bundled table's.

    Raises:
        PriceError: the file is unreadable, not YAML, or malformed (a non-numeric or negative
            price, a currency other than USD).
    """
    doc = yaml.safe_load((resources.files("scaler") / "prices.yaml").read_text(encoding="utf-8"))
    table = PriceTable(source=str(doc.get("source", "")), date=str(doc.get("date", "")))
    table.bundled_source, table.bundled_date = table.source, table.date
    table.merge(doc, "bundled prices.yaml", origin="bundled")
    if path is None:
        return table
    p = Path(path)
    extra = _read(p)
    table.merge(extra, str(p))
    own = extra if isinstance(extra, Mapping) else {}
    table.source = str(own.get("source") or f"{p.name} over {table.source}")
    table.date = str(own.get("date") or table.date)
    table.file_source, table.file_date = str(own.get("source") or p.name), table.date
    return table


def bundled_prices() -> dict[str, float]:
    """The bundled table's on-demand prices in us-central1: machine type → USD per hour."""
    return load_price_table().on_demand()


def load_prices(path: str | Path | None = None) -> dict[str, float]:
    """The replay's flat table: on-demand USD per hour by machine type in us-central1, the
    entries of ``path`` (if given) replacing or adding to the bundled ones.

    Raises:
        PriceError: as :func:`load_price_table`.
    """
    return load_price_table(path).on_demand()
