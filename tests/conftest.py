"""Shared scaffolding of the test suite: the markers every test gets, the loopback API client.

Markers (registered in ``pyproject.toml``), from the names below (a module, or ``module::test``):
a test is ``real_apiserver`` as named in :data:`REAL_APISERVER`, else ``e2e`` as named in
:data:`E2E`, else ``unit``, unless :data:`SLOW` names it: then ``slow`` instead of ``unit``
(``real_apiserver`` and ``e2e`` tests named there are ``slow`` too). ``pytest -m unit`` runs the
fast in-process tests (the core's pure code, a few quick loopback-fake tests) in seconds; ``pytest
-m "not slow"`` leaves out only the long ones. ``-m unit`` and ``-m "not unit"`` split the suite.

Fixtures: ``no_proxy`` (no proxy variable reaches a client talking to a loopback server) and
``api`` (a ``kubernetes`` API client for the module's ``fake`` :class:`fakes.kube_api.FakeKubeAPI`,
through a kubeconfig file, as the product builds it).
"""

from __future__ import annotations

import os
import sys

# Keep the compiled bytecode of the tests (their rewritten asserts) and of scaler even where
# PYTHONDONTWRITEBYTECODE is set: recompiling about 300 modules costs a run about 10 s.
sys.dont_write_bytecode = False
# pytest-xdist's workers get COLUMNS from the controller; the output tests expect scaler's own
# width rules (a terminal's width, or none when piped), so no worker inherits one.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from _pytest.mark.expression import Expression  # noqa: E402
from fakes.kube_api import FakeKubeAPI  # noqa: E402

from scaler.kube.client import make_api_client  # noqa: E402

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
        "test_docs",
        "test_deploy_hardening",
        "test_docs_commands",
        "test_dra_e2e",
        "test_dry_run_gke",
        "test_evaluation_cache_live",
        "test_fanout",
        "test_golden_replay",
        "test_history_adc",
        "test_history_deadlines",
        "test_history_gke",
        "test_history_hostile",
        "test_health_server",
        "test_history_prometheus",
        "test_image",
        "test_history_secrets",
        "test_incomplete_input",
        "test_kubectl_plugin",
        "test_monitoring",
        "test_node_status",
        "test_plugin_api",
        "test_release",
        "test_relief_e2e",
        "test_replay_cli",
        "test_replay_html",
        "test_replay_prometheus",
        "test_report_acceptance",
        "test_resize_unmeasured_e2e",
        "test_runner_e2e",
        "test_selfcheck",
        "test_snapshot_secrets",
        "test_table",
        "test_tune",
        "test_cli_flags::test_version",
        "test_edge_decisions::test_run_keeps_a_node_whose_node_metrics_are_far_below_its_pods",
        "test_edge_decisions::test_run_never_reads_pod_metrics_without_containers_as_zero",
        "test_gpu_nodes::test_dry_run_keeps_a_gpu_node_whose_real_gpu_usage_is_high",
        "test_tune_halving::test_halving_gives_the_same_frontier_on_two_workers",
        "test_mig_minimums::test_run_keeps_every_mig_of_a_zone_at_its_minimum",
        "test_snapshot_files::test_dry_run_skips_pods_bound_to_a_missing_node",
    }
)
"""Modules, or ``module::test`` names, that run whole commands, loops or processes (loopback
fakes, subprocesses, a real Prometheus, Ray, mkdocs, Chromium, pip, kubectl)."""

REAL_APISERVER = frozenset({"test_real_apiserver", "test_peer_ca", "test_real_hardening"})
"""Modules that need the real control plane or cluster-autoscaler in ``../shared`` (they skip,
saying why, without it)."""

SLOW = frozenset(
    {
        "test_bench_smoke",
        "test_cloud_gke",
        "test_decode_equivalence",
        "test_deploy",
        "test_deploy_hardening",
        "test_fake_kube_api",
        "test_image",
        "test_golden_replay",
        "test_history_deadlines",
        "test_history_gke",
        "test_kube_source",
        "test_peer_ca",
        "test_peer_objects",
        "test_real_apiserver",
        "test_real_hardening",
        "test_replay_cli",
        "test_selfcheck",
        "test_snapshot_secrets",
        "test_table",
        "test_watch",
        "test_cloud_kubernetes::test_a_delete_shed_by_apf_waits_its_retry_after",
        "test_cloud_kubernetes::test_three_deletions_with_room_for_three_all_go",
        "test_engine::test_placements_do_not_depend_on_the_order_of_the_filters",
        "test_layout::test_update_equals_a_fresh_build",
        "test_leader::test_a_hung_renewal_counts_as_failed_and_the_leader_stops",
        "test_leader::test_a_lease_request_that_never_answers_fails_the_attempt",
        "test_observability::test_healthz_turns_red_when_the_loop_stalls",
        "test_quantity::test_arbitrary_text_only_ever_raises_quantity_error",
        "test_replay::test_bundled_map_is_rederived_and_verified_from_the_trace",
        "test_retry_after::test_a_read_waits_the_retry_after_in_the_client",
        "test_retry_after::test_the_permission_check_honours_it",
        "test_replay::test_cli_json_on_the_bundled_snapshot",
        "test_spread_vector::test_filter_nodes_agrees_with_filter",
        "test_filters_vector::test_every_way_of_asking_a_filter_agrees_through_moves_and_reverts",
        "test_budgets::test_budgets_hold_nodes_exactly_as_scale_down_disabled_would",
        "test_target_usage::test_moved_columns_are_the_sum_of_the_loads_placed_through_every_revert",
        "test_sizes::test_no_function_over_80_lines",
        "test_replay::test_bitbrains_columnar_reader_equals_the_row_reader",
        "test_evaluation_cache::test_incremental_evaluation_equals_a_full_one_at_every_step",
        "test_layout::test_unchanged_keys_may_be_listed_as_changed",
        "test_engine::test_no_destination_ends_above_the_targets",
        "test_world_index::test_world_index_answers_as_a_full_rebuild",
        "test_docs_commands",
        "test_tune_halving::test_a_rung_is_the_first_steps_of_the_whole_replay",
        "test_tune_halving::test_halving_replays_a_third_on_each_longer_window_and_says_which",
        "test_tune_halving::test_halving_gives_the_same_frontier_on_two_workers",
        "test_tune_halving::test_the_same_trials_without_halving_agree",
    }
)
"""Modules, or ``module::test`` names, that take seconds: a test by itself, or a module's tests in
all (the watch cache, the fake API server's own tests, the API clients' retries and timeouts);
measured with ``pytest --durations``. A slow in-process test is ``slow`` instead of ``unit``."""

MARKERS = frozenset({"unit", "e2e", "real_apiserver", "slow"})
"""The markers this file gives (a test module does not set them itself)."""

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


def markers(module: str, test: str = "") -> set[str]:
    """The markers this scaffolding gives test ``test`` of ``module`` (a file's stem); with no
    ``test``, those every test of the module gets whatever its name."""
    names = {module, f"{module}::{test}"} if test else {module}
    slow = bool(names & SLOW)
    if names & REAL_APISERVER:
        kind = "real_apiserver"
    elif names & E2E:
        kind = "e2e"
    elif not test and any(n.startswith(f"{module}::") for n in E2E | REAL_APISERVER):
        return set()  # not the same for every test of the module
    elif not test and not slow and any(n.startswith(f"{module}::") for n in SLOW):
        return set()
    else:
        kind = "" if slow else "unit"
    return {m for m in (kind, "slow" if slow else "") if m}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Do not even import a module none of whose tests ``-m`` can select (a module-wide marker
    set that fails the expression whatever the tests' own marks): ``pytest -m unit`` skips the
    e2e and real-API-server modules' imports. ``None`` (no opinion) otherwise."""
    text = config.getoption("markexpr", "")
    if not text or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    module_markers = markers(collection_path.stem)
    if not module_markers:
        return None
    expression = Expression.compile(text)

    def matcher(own: bool) -> Any:
        # The four markers are this file's alone; the module's own marks (skipif, parametrize,
        # ...) are unknown here, as are arguments.
        def match(name: str, /, **kwargs: object) -> bool:
            return name in module_markers if name in MARKERS and not kwargs else own

        return match

    # Ignored only if the expression fails whether the unknown marks match or not.
    return None if any(expression.evaluate(matcher(own)) for own in (False, True)) else True


SPLIT_MODULES = {"test_real_apiserver": "test_fault_"}
"""Modules whose tests run as two groups under pytest-xdist (each with its own module-scoped
fixtures, a control plane here): the tests whose name starts with the prefix, and the others."""

SHARED_SCOPES = frozenset({"module", "package", "session"})
"""Scopes of a fixture made once for many tests."""


def shares_a_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses, directly or through another fixture, a fixture of this suite
    (a test module's or this file's, not pytest's or a plugin's) made once for many tests: a
    control plane, a Prometheus, built images, a replay's report."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        d.scope in SHARED_SCOPES and d.baseid  # a plugin's or pytest's own fixture has no baseid
        for defs in info.name2fixturedefs.values()
        for d in defs
    )


def xdist_group(module: str, test: str) -> str:
    """The pytest-xdist group of a test that shares a fixture (``make test`` runs ``--dist
    loadgroup``): its module, so that the module's fixtures are made once, on one worker, except
    in :data:`SPLIT_MODULES`. A test that shares none is a group of its own, for any free worker."""
    prefix = SPLIT_MODULES.get(module)
    return f"{module}:{prefix}" if prefix is not None and test.startswith(prefix) else module


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every collected test as :func:`markers` says, and with its :func:`xdist_group` where
    it :func:`shares_a_fixture`, else with a group of its own (every test id then carries a
    group, which :func:`pytest_xdist_node_collection_finished` checks). First of the hook's
    implementations: pytest-xdist's own turns the ``xdist_group`` mark into the ``@group``
    suffix of the test's id that ``--dist loadgroup`` schedules by, and must see the mark."""
    for index, item in enumerate(items):
        module = Path(str(item.fspath)).stem
        test = getattr(item, "originalname", item.name)
        for name in markers(module, test):
            item.add_marker(getattr(pytest.mark, name))
        group = xdist_group(module, test) if shares_a_fixture(item) else f"alone-{index}"
        item.add_marker(pytest.mark.xdist_group(group))
    # The slow tests first, each set in collection order: pytest-xdist hands the groups out in
    # this order (the largest groups first), so a long test does not start last and end the
    # run alone (longest first: the classic rule for the shortest schedule on several workers).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Under ``--dist loadgroup``, stop at once if a test id a worker collected carries no group
    (every test has one: :func:`pytest_collection_modifyitems`): the grouping silently failed
    (as with pytest 9.2 and pytest-xdist 3.8, pytest-dev/pytest-xdist#1386), and every worker
    would make every module's fixtures.

    Raises:
        pytest.UsageError: a collected test id without its ``@group`` suffix.
    """
    lost = [i for i in ids if "@" not in i]
    if node.config.getvalue("dist") == "loadgroup" and lost:
        raise pytest.UsageError(
            f"pytest-xdist did not group {lost[0]} (--dist loadgroup): pytest "
            f"{pytest.__version__} with this pytest-xdist drops the groups; see pyproject.toml's pin"
        )


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
