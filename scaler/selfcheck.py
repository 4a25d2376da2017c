"""``python -m scaler.selfcheck``: import every module that the container image's commands load,
as the image's build does last (as the image's user), so that an image missing a dependency or
a file of its own fails to build instead of failing at its first loop.

:data:`CONTROLLER_MODULES` are what ``scaler run`` (leader or follower, ``--dry-run`` or not,
either cloud provider, the health server, drains and rollbacks) and ``scaler dry-run`` (snapshot
files or a live cluster) load, plus every registered plugin and eviction metric (entry points of
``scaler.plugins`` and ``scaler.eviction_metrics``). ``--tune`` adds :data:`TUNE_MODULES`: what
``scaler replay``, ``scaler tune`` (with Ray) and ``scaler history export`` load, which the
``tune`` extra installs. ``tests/test_selfcheck.py`` runs those commands for real and fails
when one of them loads a module that importing these lists does not: a new deferred import
belongs in a list.

``--compile`` also writes the bytecode of each module loaded from outside the standard library
(unchecked-hash ``.pyc`` files, as ``compileall --invalidation-mode unchecked-hash`` writes them,
valid on a read-only file system whatever the files' times), and of no other: the controller
image carries no bytecode for the thousands of modules of its dependencies it never imports,
and pays no compilation at start for those it does.

It also reads the package's own files through their loaders (:data:`CONTROLLER_DATA`, and
:data:`TUNE_DATA` with ``--tune``): a file left out of the wheel fails the build too.

Exit status 0; 1 when a module cannot be imported or a file read (one line naming it and the
error).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import py_compile
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path

from scaler.errors import ScalerError

__all__ = [
    "CONTROLLER_DATA",
    "CONTROLLER_MODULES",
    "TUNE_DATA",
    "TUNE_MODULES",
    "check",
    "compile_loaded",
    "main",
]

CONTROLLER_MODULES: tuple[str, ...] = (
    # the command line (:func:`check` also builds its parser, which imports every sub-command's)
    "scaler.cli",
    # the live process
    "scaler.runner",
    "scaler.observability",
    "scaler.kube.client",
    # the Kubernetes client's API classes, loaded when first named (by the kinds read and written)
    "kubernetes.client.api.core_v1_api",
    "kubernetes.client.api.apps_v1_api",
    "kubernetes.client.api.batch_v1_api",
    "kubernetes.client.api.policy_v1_api",
    "kubernetes.client.api.coordination_v1_api",
    "kubernetes.client.api.authorization_v1_api",
    "kubernetes.client.api.custom_objects_api",
    "scaler.kube.leader",
    "scaler.kube.permissions",
    "scaler.kube.writer",
    "scaler.sources.watch",
    "scaler.sources.kube",
    "scaler.sources.files",
    "scaler.simulator.registry",
    "scaler.controller",
    "scaler.actuation.actuator",
    "scaler.actuation.recheck",
    "scaler.eviction.executor",
    "scaler.relief",
    "scaler.names",
    "scaler.prices",
    "scaler.history.source",
    "scaler.history.prometheus",
    # the cloud providers and what their clients load when they are built
    "scaler.cloud.gke",
    "scaler.cloud.kubernetes",
    "scaler.cloud.metadata",
    "google.cloud.compute_v1",
    "google.cloud.container_v1",
    "google.cloud.resourcemanager_v3",
    "google.auth.transport.requests",
    "google.auth.compute_engine",
    # scaler dry-run: the report, its table and its other outputs
    "scaler.engine",
    "scaler.report.build",
    "scaler.report.table",
    "scaler.report.compare",
    "scaler.why",
    "scaler.status",
    "numpy.ma",  # loaded by NumPy itself, on a first use during the dry-run of the bundled example
)
"""Modules ``scaler run`` and ``scaler dry-run`` load (with their own imports), by name."""

TUNE_MODULES: tuple[str, ...] = (
    "scaler.tune.search",
    "scaler.tune.html",
    "scaler.history.export",
    "scaler.replay.html",
    "scaler.replay.traces",
    "scaler.fanout",
    "optuna",
    "ray",
    "ray.util.queue",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.csv",
    "pyarrow.parquet",
    "plotly.graph_objects",
)
"""Modules ``scaler replay``, ``scaler tune`` and ``scaler history export`` load besides
:data:`CONTROLLER_MODULES`: the ``tune`` extra's."""

CONTROLLER_DATA: tuple[tuple[str, str], ...] = (
    ("the bundled price table (prices.yaml)", "scaler.prices:load_price_table"),
)
"""(what, ``module:function`` called without arguments) for the package's own files that
``scaler run`` and ``scaler dry-run`` read: read through their real loaders."""

TUNE_DATA: tuple[tuple[str, str], ...] = (
    ("the default search space (tune/default-space.yaml)", "scaler.tune.space:default_space_text"),
)
"""The same for ``scaler tune``'s own files."""

ENTRY_POINT_GROUPS = ("scaler.plugins", "scaler.eviction_metrics")
"""Entry-point groups whose every target ``scaler run`` may load (by its configuration)."""


class SelfCheckError(ScalerError):
    """A module could not be imported (the installation or the image is incomplete): the
    message names it and the error."""


def check(
    modules: Iterable[str],
    groups: Iterable[str] = ENTRY_POINT_GROUPS,
    data: Iterable[tuple[str, str]] = CONTROLLER_DATA,
) -> int:
    """Import ``modules``, build the command line's parser as every ``scaler`` command does
    (it imports each sub-command's flags), load every entry point of ``groups`` and read the
    package's own files of ``data``; returns how many modules are loaded in all
    (``sys.modules``).

    Raises:
        SelfCheckError: a module or an entry point's target cannot be imported, or a file of
            the package cannot be read (not installed).
    """
    from importlib.metadata import entry_points

    for what, target in data:
        module, _, function = target.partition(":")
        try:
            getattr(importlib.import_module(module), function)()
        except Exception as e:
            raise SelfCheckError(f"cannot read {what}: {type(e).__name__}: {e}") from e

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as e:  # ImportError, or any error of the module's own code
            raise SelfCheckError(f"cannot import {name}: {type(e).__name__}: {e}") from e
    try:
        importlib.import_module("scaler.cli").build_parser()
    except Exception as e:
        raise SelfCheckError(f"cannot build the command line: {type(e).__name__}: {e}") from e
    for group in groups:
        for ep in entry_points(group=group):
            try:
                ep.load()
            except Exception as e:
                raise SelfCheckError(
                    f"cannot load entry point {ep.name} ({ep.value}) of {group}: {type(e).__name__}: {e}"
                ) from e
    return len(sys.modules)


def compile_loaded() -> list[Path]:
    """Write the unchecked-hash bytecode of every loaded module whose source lies outside the
    standard library (the virtualenv's packages); returns the source files compiled.

    Raises:
        py_compile.PyCompileError: a source does not compile.
        OSError: the bytecode cannot be written.
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    done: list[Path] = []
    for module in list(sys.modules.values()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if not origin or not origin.endswith(".py"):
            continue
        source = Path(origin).resolve()
        if source.is_relative_to(stdlib) and "site-packages" not in source.parts:
            continue
        py_compile.compile(
            str(source),
            cfile=importlib.util.cache_from_source(str(source)),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        done.append(source)
    return done


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scaler.selfcheck [--tune] [--compile]``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m scaler.selfcheck",
        description="Import every module the container image's commands load (the image's build runs this).",
    )
    parser.add_argument("--tune", action="store_true", help="also replay's, tune's and history export's")
    parser.add_argument("--compile", action="store_true", help="write the bytecode of the modules loaded")
    args = parser.parse_args(argv)
    modules = CONTROLLER_MODULES + (TUNE_MODULES if args.tune else ())
    try:
        loaded = check(modules, data=CONTROLLER_DATA + (TUNE_DATA if args.tune else ()))
    except SelfCheckError as e:
        sys.stderr.write(f"scaler selfcheck: {e}\n")
        return 1
    line = f"scaler selfcheck: {loaded} modules imported"
    if args.compile:
        line += f", bytecode written for {len(compile_loaded())}"
    sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
