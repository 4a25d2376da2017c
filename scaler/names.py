"""Names in the configuration that must name something in the cluster.

A node pool, MIG or machine type named in the configuration and absent from the cluster is
almost always a typo (``--nodes=1:10:defualt-pool``), and silently matching nothing changes the
verdicts (no minimum holds, no per-pool setting applies, no budget holds). :func:`unmatched_names`
lists every such name with the closest existing one (:func:`difflib.get_close_matches`), for:

* ``--nodes`` entries: a node pool, or a MIG (``gke-CLUSTER-POOL-HASH-grp`` or its URL);
* ``node-pools`` keys (config file);
* ``nodePools`` of ``budgets`` / ``--scale-down-budget``;
* the machine types of a ``--prices`` file (the bundled table is not checked: it lists types a
  cluster need not have).

Where each check runs (:mod:`scaler.cli`, :mod:`scaler.runner`): ``scaler dry-run`` refuses
(exit 2) when a name matches nothing in the snapshot, whose nodes are the whole cluster it
judges. ``scaler run`` checks once, at start-up: against the node pools and MIGs the GKE API
lists (a pool scaled to zero nodes is still listed) it refuses to start; where only nodes are
known (``--cloud-provider=kubernetes``: a pool scaled to zero has no node left) and for machine
types, it logs a warning and starts. The loop itself never stops on a name: a pool deleted
later only makes its entry match nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import yaml

from scaler.config import ScalerConfig
from scaler.limits import instance_group_base
from scaler.model.records import Node

__all__ = [
    "ClusterNames",
    "cluster_names",
    "price_file_machine_types",
    "unmatched_machine_types",
    "unmatched_names",
]

_LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
_LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
_PRICE_META = frozenset({"source", "date", "currency", "region", "regions"})


class ClusterNames:
    """The node pools, MIGs and machine types a cluster has.

    Args:
        pools: node-pool names.
        migs: MIG names (``gke-CLUSTER-POOL-HASH-grp``).
        machine_types: machine types of the nodes (``node.kubernetes.io/instance-type``).
    """

    def __init__(self, pools: Iterable[str], migs: Iterable[str], machine_types: Iterable[str] = ()) -> None:
        self.pools = frozenset(p for p in pools if p)
        self.migs = frozenset(m for m in migs if m)
        self.machine_types = frozenset(t for t in machine_types if t)


def cluster_names(nodes: Iterable[Node]) -> ClusterNames:
    """The names a set of nodes shows: their ``cloud.google.com/gke-nodepool`` labels, their MIGs
    as GKE names instances (:func:`scaler.limits.instance_group_base` plus ``-grp``) and
    their machine types."""
    pools: set[str] = set()
    migs: set[str] = set()
    types: set[str] = set()
    for n in nodes:
        pools.add(n.node_group)
        base = instance_group_base(n.name)
        if base:
            migs.add(f"{base}-grp")
        types.add(n.labels.get(_LABEL_INSTANCE_TYPE) or n.labels.get(_LABEL_INSTANCE_TYPE_BETA, ""))
    return ClusterNames(pools, migs, types)


def _closest(name: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def unmatched_names(config: ScalerConfig, known: ClusterNames, where: str = "the cluster") -> list[str]:
    """One line per pool or MIG name of ``config`` that ``known`` does not have, each with the
    closest existing name when one is close; ``[]`` when every name matches. ``where`` says
    what was searched (``the snapshot``, ``the cluster``)."""
    problems: list[str] = []
    pool_or_mig = known.pools | known.migs
    for spec in config.nodes:
        if spec.name not in pool_or_mig:
            problems.append(
                f"--nodes entry {spec.name!r} names no node pool or MIG of {where}{_closest(spec.name, pool_or_mig)}"
            )
    for pool in config.node_pools:
        if pool not in known.pools:
            problems.append(
                f"node-pools key {pool!r} names no node pool of {where}{_closest(pool, known.pools)}"
            )
    for budget in config.budgets:
        for pool in budget.node_pools:
            if pool not in known.pools:
                problems.append(
                    f"budget {budget.name!r}: nodePools entry {pool!r} names no node pool of {where}"
                    f"{_closest(pool, known.pools)}"
                )
    return problems


def price_file_machine_types(path: str | Path) -> set[str]:
    """The machine types a ``--prices`` file gives prices for (either layout, see
    :mod:`scaler.prices`); the file was validated by
    :func:`~scaler.prices.load_price_table` before. Empty when it cannot be read."""
    try:
        doc: Any = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return set()
    if not isinstance(doc, dict):
        return set()
    types: set[str] = set()
    sections = [doc]
    regions = doc.get("regions")
    if isinstance(regions, dict):
        sections += [r for r in regions.values() if isinstance(r, dict)]
    structured = any(isinstance(doc.get(k), dict) for k in ("prices", "spot")) or isinstance(regions, dict)
    for section in sections:
        for kind in ("prices", "spot"):
            body = section.get(kind)
            if isinstance(body, dict):
                types.update(str(k) for k in body)
    if not structured:  # a plain machine-type: USD/h mapping
        types.update(str(k) for k in doc if k not in _PRICE_META)
    return types


def unmatched_machine_types(
    config: ScalerConfig, known: ClusterNames, where: str = "the cluster"
) -> list[str]:
    """One line per machine type of the ``--prices`` file (none without one) that no node of
    ``known`` has, with the closest existing one."""
    if not config.prices:
        return []
    return [
        f"--prices: machine type {t!r} is the type of no node of {where}{_closest(t, known.machine_types)}"
        for t in sorted(price_file_machine_types(config.prices))
        if t not in known.machine_types
    ]
