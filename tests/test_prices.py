"""Node prices (``scaler.prices``) and the savings of the dry-run report: machine type,
region, on-demand or Spot, unknown prices, ``--prices`` files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from builders import make_node

from scaler.cli import main
from scaler.prices import HOURS_PER_MONTH, PriceError, load_price_table

EXAMPLE = Path("scaler/examples/bitbrains-gke-day1")


def gke_node(machine: str = "n1-standard-8", zone: str = "us-central1-a", **labels: str) -> Any:
    base = {"node.kubernetes.io/instance-type": machine, "topology.kubernetes.io/region": zone.rsplit("-", 1)[0]}
    return make_node("n", zone=zone, labels=base | labels)


def test_bundled_on_demand_price_and_monthly_cost() -> None:
    table = load_price_table()
    assert "pricing" in table.source and table.date
    price = table.node_price(gke_node())
    assert (price.machine_type, price.region, price.kind) == ("n1-standard-8", "us-central1", "on-demand")
    assert price.hourly_usd == pytest.approx(0.38) and price.monthly_usd == pytest.approx(0.38 * HOURS_PER_MONTH)


def test_spot_and_preemptible_nodes_are_priced_as_spot_never_on_demand() -> None:
    table = load_price_table()
    for label in ("cloud.google.com/gke-spot", "cloud.google.com/gke-preemptible"):
        price = table.node_price(gke_node(**{label: "true"}))
        assert price.kind == "spot" and price.hourly_usd is None and price.monthly_usd is None
    assert table.node_price(gke_node(**{"cloud.google.com/gke-spot": "false"})).kind == "on-demand"


def test_unknown_machine_type_region_or_label_is_unknown_not_zero() -> None:
    table = load_price_table()
    assert table.node_price(gke_node("x9-custom-3")).hourly_usd is None
    assert table.node_price(gke_node(zone="europe-west1-b")).hourly_usd is None  # bundled: us-central1 only
    bare = make_node("n", zone="us-central1-f")
    price = table.node_price(bare)
    assert price.machine_type == "" and price.region == "us-central1" and price.monthly_usd is None


def test_a_price_file_adds_regions_and_spot_and_overrides(tmp_path: Path) -> None:
    f = tmp_path / "prices.yaml"
    f.write_text(
        "source: our billing export\n"
        "date: 2026-10\n"
        "region: us-central1\n"
        "spot: {n1-standard-8: 0.08}\n"
        "regions:\n"
        "  europe-west1:\n"
        "    prices: {n1-standard-8: 0.4181}\n"
        "    spot: {n1-standard-8: 0.0882}\n"
    )
    table = load_price_table(f)
    assert (table.source, table.date) == ("our billing export", "2026-10")
    assert table.node_price(gke_node(**{"cloud.google.com/gke-spot": "true"})).hourly_usd == 0.08
    assert table.node_price(gke_node(zone="europe-west1-b")).hourly_usd == 0.4181
    spot_eu = gke_node(zone="europe-west1-b", **{"cloud.google.com/gke-preemptible": "true"})
    assert table.node_price(spot_eu).hourly_usd == 0.0882
    assert table.node_price(gke_node()).hourly_usd == pytest.approx(0.38)  # bundled, untouched
    # A plain mapping (no region) replaces the type's price in every region.
    g = tmp_path / "plain.yaml"
    g.write_text("n1-standard-8: 0.3\nmy-type: 1.5\n")
    plain = load_price_table(g)
    assert plain.node_price(gke_node()).hourly_usd == 0.3
    assert plain.node_price(gke_node("my-type", zone="asia-east1-a")).hourly_usd == 1.5
    assert plain.source.startswith("plain.yaml over ")


@pytest.mark.parametrize(("text", "message"), [
    ("n1-standard-8: -1\n", "price of 'n1-standard-8' must be a number >= 0"),
    ("prices: {n1-standard-8: cheap}\n", "prices: price of 'n1-standard-8'"),
    ("currency: EUR\nprices: {n1-standard-8: 0.3}\n", "must be in USD"),
    ("regions: {europe-west1: {ondemand: {a: 1}}}\n", "regions.europe-west1 must hold only"),
    ("- a\n", "expected a mapping"),
    ("spot: {a: 1}\nb: 2\n", "unknown key 'b'"),
    ("prices: [\n", "invalid YAML"),
])  # fmt: skip
def test_bad_price_files_name_the_entry(
    tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(PriceError, match=message):
        load_price_table(f)
    assert main(["dry-run", "--snapshot", str(EXAMPLE), "--prices", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scaler: error: --prices: ") and err.count("\n") == 1


# ---- the dry-run report -------------------------------------------------------------------------


def snapshot_with_spot_and_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, list[str]]:
    """The bundled example with its first removable node on Spot and its second of an unknown
    machine type; returns the copy and the removable nodes' names."""
    assert main(["dry-run", "--snapshot", str(EXAMPLE), "-o", "json"]) == 0
    removable = [n["name"] for n in json.loads(capsys.readouterr().out)["nodes"] if n["removable"]]
    snap = tmp_path / "snap"
    shutil.copytree(EXAMPLE, snap)
    doc = json.loads((snap / "nodes.json").read_text())
    for item in doc["items"]:
        labels = item["metadata"]["labels"]
        if item["metadata"]["name"] == removable[0]:
            labels["cloud.google.com/gke-spot"] = "true"
        if item["metadata"]["name"] == removable[1]:
            labels["node.kubernetes.io/instance-type"] = "x9-custom-3"
    (snap / "nodes.json").write_text(json.dumps(doc))
    return snap, removable


def test_the_report_gives_the_monthly_cost_of_removable_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap, removable = snapshot_with_spot_and_unknown(tmp_path, capsys)
    assert main(["dry-run", "--snapshot", str(snap), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by = {n["name"]: n for n in report["nodes"]}
    spot, unknown = by[removable[0]]["cost"], by[removable[1]]["cost"]
    assert spot["pricing"] == "spot" and spot["monthlyUsd"] is None
    assert unknown["machineType"] == "x9-custom-3" and unknown["hourlyUsd"] is None
    known = [by[n]["cost"]["monthlyUsd"] for n in removable[2:]]
    savings = report["summary"]["savings"]
    assert savings["monthlyUsd"] == pytest.approx(sum(known)) and savings["pricedNodes"] == len(known)
    assert savings["unpricedNodes"] == 2 and savings["priceDate"] == "2024-2025"
    # The table names the price source and date, and says "unknown" for a node without a price.
    assert main(["dry-run", "--snapshot", str(snap)]) == 0
    table = capsys.readouterr().out
    assert "prices: Google Cloud VM instance pricing" in table and "2024-2025" in table
    assert "unknown" in table and "2 removable node(s) of unknown price not counted" in table
    assert f"${sum(known):,.2f}/month" in table
    # With Spot prices for the type and a price for the unknown one, every node is priced.
    f = tmp_path / "prices.yaml"
    f.write_text("date: 2026-11\nspot: {n1-standard-8: 0.08, n2-highmem-4: 0.06}\nprices: {x9-custom-3: 0.5}\n")
    assert main(["dry-run", "--snapshot", str(snap), "-o", "json", "--prices", str(f)]) == 0
    priced = json.loads(capsys.readouterr().out)["summary"]["savings"]
    assert priced["unpricedNodes"] == 0
    # Priced from the file and from the bundled table (the known nodes' type): both are named.
    assert priced["priceSource"].startswith("prices.yaml, 2026-11, and for the machine types it does not price Google")
    extra = (0.08 if by[removable[0]]["cost"]["machineType"] == "n1-standard-8" else 0.06) + 0.5
    assert priced["monthlyUsd"] == pytest.approx(sum(known) + extra * HOURS_PER_MONTH)


def test_no_removable_node_saves_nothing_and_none_priced_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dry-run", "--snapshot", str(EXAMPLE), "-o", "json", "--scale-down-budget", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["savings"]["monthlyUsd"] == 0.0
    f = tmp_path / "prices.yaml"  # a region without prices: every removable node is unknown
    snap = tmp_path / "snap"
    shutil.copytree(EXAMPLE, snap)
    text = (snap / "nodes.json").read_text().replace('"us-central1"', '"europe-west4"')
    (snap / "nodes.json").write_text(text)
    f.write_text("region: europe-west4\nprices: {}\n")
    assert main(["dry-run", "--snapshot", str(snap), "-o", "json", "--prices", str(f)]) == 0
    savings = json.loads(capsys.readouterr().out)["summary"]["savings"]
    assert savings["monthlyUsd"] is None and savings["pricedNodes"] == 0 and savings["unpricedNodes"] > 0
