"""``python -m scaler.selfcheck`` imports every module the controller image's commands load.

The container image's build ends with that check (and writes bytecode for exactly those modules),
so its lists must cover what the commands really load: here a real ``scaler run`` (leader, through
a drain and a VM deletion, then SIGTERM) against the loopback Kubernetes and GCE fakes, a real
``scaler dry-run`` of a live cluster with ``--cloud-provider gke``, and ``scaler dry-run`` of the
bundled example each record the modules they loaded when they exit; each of those must also be
loaded by the check in a fresh interpreter. A new deferred import on one of those paths fails here
until it is added to :data:`scaler.selfcheck.CONTROLLER_MODULES`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_cluster import E2ECluster, WallClock
from waiting import wait_for

from scaler.selfcheck import CONTROLLER_MODULES, TUNE_MODULES, main

RECORD = """
import atexit, json, sys
OUT = sys.argv[1]
atexit.register(lambda: open(OUT, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["scaler", *sys.argv[2:]]
from scaler.cli import main
sys.exit(main())
"""
"""``python -c RECORD OUT ARGS…``: ``scaler ARGS…``, writing the names of the modules it loaded
to ``OUT`` when it exits."""

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")




def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    return {**env, **extra}


@pytest.fixture(scope="module")
def loaded_by_check() -> set[str]:
    """The modules ``check(CONTROLLER_MODULES)`` loads in a fresh interpreter."""
    code = "import json, sys; from scaler.selfcheck import CONTROLLER_MODULES, check; check(CONTROLLER_MODULES); print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_env())
    return set(json.loads(out.stdout))


def _not_covered(loaded: set[str], covered: set[str]) -> list[str]:
    # __main__ is the recording wrapper itself
    return sorted(m for m in loaded - covered if m != "__main__")


def test_the_check_covers_what_scaler_run_and_dry_run_load(tmp_path: Path, loaded_by_check: set[str]) -> None:
    records: dict[str, Path] = {}
    with E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        env = _env(SCALER_GCE_API_ENDPOINT=c.gce.url, POD_NAME="scaler-0")
        kubeconfig = str(c.kube.write_kubeconfig(tmp_path / "kubeconfig"))
        gke = ["--gke-project=acme", "--gke-location=europe-west1", "--gke-cluster=prod"]
        records["scaler run"] = tmp_path / "run.json"
        run = [
            "run", "--kubeconfig", kubeconfig, "--leader-elect=true", "--namespace=scaler-system",
            "--scale-down-unneeded-time=0s", "--scan-interval=0.2s", "--node-delete-delay-after-taint=0s",
            "--scale-down-delay-after-add=0s", "--max-pod-eviction-time=30s", "--address=127.0.0.1:0", *gke,
        ]  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-c", RECORD, str(records["scaler run"]), *run],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: bool(c.gce.deleted_instances) or proc.poll() is not None, 90, "a VM deleted")
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert proc.returncode == 0, out[-3000:]
        records["scaler dry-run (live, gke)"] = tmp_path / "dry-run-live.json"
        live = ["dry-run", "--kubeconfig", kubeconfig, "--cloud-provider", "gke", *gke, "-o", "json"]
        done = subprocess.run(
            [sys.executable, "-c", RECORD, str(records["scaler dry-run (live, gke)"]), *live],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    records["scaler dry-run (bundled example)"] = tmp_path / "dry-run.json"
    done = subprocess.run(
        [sys.executable, "-c", RECORD, str(records["scaler dry-run (bundled example)"]), "dry-run"],
        env=_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for command, path in records.items():
        missing = _not_covered(set(json.loads(path.read_text())), loaded_by_check)
        assert missing == [], (
            f"{command} loaded modules python -m scaler.selfcheck does not: add them (or the module that "
            f"imports them) to scaler.selfcheck.CONTROLLER_MODULES: {missing}"
        )


def test_the_controller_list_leaves_out_the_tune_extra(loaded_by_check: set[str]) -> None:
    """The controller image has no Ray, Optuna, pyarrow or plotly: its check imports none."""
    covered = {m.partition(".")[0] for m in loaded_by_check}
    assert covered.isdisjoint({"ray", "optuna", "pyarrow", "plotly"}), covered & {"ray", "optuna", "pyarrow", "plotly"}
    assert {"ray", "optuna", "pyarrow", "plotly"} <= {m.partition(".")[0] for m in TUNE_MODULES}


def test_a_module_that_cannot_be_imported_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("scaler.selfcheck.CONTROLLER_MODULES", (*CONTROLLER_MODULES, "scaler.no_such_module"))
    assert main([]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot import scaler.no_such_module: ModuleNotFoundError" in err


def _no_such_file() -> None:
    raise FileNotFoundError(2, "No such file or directory", "/opt/venv/lib/python3.11/site-packages/scaler/prices.yaml")


def test_a_file_of_the_package_left_out_fails_the_check_naming_it() -> None:
    """The image's build runs the check: a file the controller reads that the wheel left out
    (pyproject.toml's package-data) stops the build, one line naming what and where."""
    from scaler.selfcheck import CONTROLLER_DATA, SelfCheckError, check

    assert check((), (), CONTROLLER_DATA) > 0  # the real files of this tree are read
    with pytest.raises(SelfCheckError, match=r"^cannot read the price table: FileNotFoundError: .*scaler/prices.yaml'$"):
        check((), (), (("the price table", "tests.test_selfcheck:_no_such_file"),))
