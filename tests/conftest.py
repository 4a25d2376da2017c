"""Shared scaffolding of the test suite: the markers every module gets, the loopback API client.

Markers (registered in ``pyproject.toml``): every test is ``e2e`` or ``real_apiserver`` as its
module is in :data:`E2E` or :data:`REAL_APISERVER`, else ``unit``; the modules and tests in
:data:`SLOW` are ``slow`` (an in-process one instead of ``unit``). ``pytest -m unit`` runs the
fast in-process tests (pure code, loopback fakes) in seconds; ``pytest -m "not slow"`` leaves out
only the long ones.

Fixtures: ``no_proxy`` (no proxy variable reaches a client talking to a loopback server) and
``api`` (a ``kubernetes`` API client for the module's ``fake`` :class:`fakes.kube_api.FakeKubeAPI`,
through a kubeconfig file, as the product builds it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.kube_api import FakeKubeAPI

from scaler.kube.client import make_api_client

E2E = frozenset(
    {
        "test_bench_smoke",
        "test_budgets_e2e",
        "test_cli",
        "test_cli_cluster",
        "test_cli_live",
        "test_controller_e2e",
        "test_decisions_e2e",
        "test_deploy",
        "test_history_prometheus",
        "test_incomplete_input",
        "test_plugin_api",
        "test_relief_e2e",
        "test_replay_cli",
        "test_replay_html",
        "test_replay_prometheus",
        "test_report_acceptance",
        "test_runner_e2e",
        "test_table",
    }
)
"""Modules that run whole commands, loops or processes (loopback fakes, subprocesses, a real
Prometheus, Chromium, pip, kubectl)."""

REAL_APISERVER = frozenset({"test_real_apiserver", "test_peer_ca"})
"""Modules that need the real control plane or cluster-autoscaler in ``../shared`` (they skip,
saying why, without it)."""

SLOW = frozenset(
    {
        "test_bench_smoke",
        "test_decode_equivalence",
        "test_deploy",
        "test_peer_ca",
        "test_real_apiserver",
        "test_replay_cli",
        "test_table",
        "test_engine::test_placements_do_not_depend_on_the_order_of_the_filters",
        "test_layout::test_update_equals_a_fresh_build",
        "test_quantity::test_arbitrary_text_only_ever_raises_quantity_error",
        "test_replay::test_bundled_map_is_rederived_and_verified_from_the_trace",
        "test_replay::test_cli_json_on_the_bundled_snapshot",
        "test_spread_vector::test_filter_nodes_agrees_with_filter",
    }
)
"""Modules, or ``module::test`` names, that take seconds by themselves (measured with
``pytest --durations``). A slow in-process test is ``slow`` instead of ``unit``."""

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every collected test ``unit``, ``e2e`` or ``real_apiserver`` by its module, and
    ``slow`` where :data:`SLOW` names its module or its test."""
    for item in items:
        module = Path(str(item.fspath)).stem
        slow = module in SLOW or f"{module}::{getattr(item, 'originalname', item.name)}" in SLOW
        if module in REAL_APISERVER:
            item.add_marker(pytest.mark.real_apiserver)
        elif module in E2E:
            item.add_marker(pytest.mark.e2e)
        elif not slow:
            item.add_marker(pytest.mark.unit)
        if slow:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy variable: the client talks to the loopback server directly."""
    for var in PROXY_VARIABLES:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def api(fake: FakeKubeAPI, tmp_path: Path) -> Iterator[Any]:
    """A ``kubernetes.client.ApiClient`` for the module's ``fake`` API server (its kubeconfig
    written to ``tmp_path``); closed after the test."""
    client: Any = make_api_client(str(fake.write_kubeconfig(tmp_path / "kubeconfig")))
    yield client
    client.close()
