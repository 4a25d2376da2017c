"""`scaler snapshot` leaks nothing a pod spec may carry: env values, managedFields and kubectl's
last-applied annotation are stripped (``--raw`` keeps them), files are 0600 and a directory it
creates 0700; what scaler writes from a snapshot (dry-run, why, replay reports, tune results)
repeats none of it.

Against the loopback fake API server (real HTTP); the same check against the real kube-apiserver
is in :mod:`test_real_hardening`.
"""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from fakes.kube_api import FakeKubeAPI
from test_replay_cli import LOWREQ, write_trace

from scaler.cli import main
from scaler.sources.files import load_objects
from scaler.sources.writer import LAST_APPLIED_ANNOTATION, redact, write_snapshot

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "scaler" / "examples" / "bitbrains-gke-day1"
NOW = "2026-11-04T13:59:48Z"
SECRET = "hunter2-s3cr3t-PASSWORD"


def with_secret(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as `kubectl apply` leaves a pod whose manifest carries a password: in an env value
    of a container and of an init container, in the last-applied annotation (which repeats the
    manifest) and named in managedFields; plus a valueFrom reference, which is no secret."""
    pod = copy.deepcopy(pod)
    spec = pod["spec"]
    env = [
        {"name": "DB_PASSWORD", "value": SECRET},
        {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"name": "db", "key": "user"}}},
    ]
    spec["containers"][0]["env"] = env
    spec["initContainers"] = [{"name": "migrate", "image": "migrate:1", "env": [{"name": "TOKEN", "value": SECRET}]}]
    meta = pod["metadata"]
    applied = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": meta["name"]}, "spec": {"containers": [{"env": env}]}}
    meta.setdefault("annotations", {})[LAST_APPLIED_ANNOTATION] = json.dumps(applied)
    meta["managedFields"] = [{"manager": "kubectl-client-side-apply", "operation": "Update",
                              "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"c"}': {"f:env": {}}}}}}]  # fmt: skip
    return pod


def secret_objects(example: Path = EXAMPLE) -> list[dict[str, Any]]:
    """A bundled example, with the secret in its first pod and in a ReplicaSet's template."""
    objects = [dict(o) for o in load_objects([example])]
    pod = next(i for i, o in enumerate(objects) if o["kind"] == "Pod")
    objects[pod] = with_secret(objects[pod])
    rs = next(i for i, o in enumerate(objects) if o["kind"] == "ReplicaSet")
    objects[rs] = copy.deepcopy(objects[rs])
    objects[rs].setdefault("spec", {})["template"] = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "app:1", "env": [{"name": "API_KEY", "value": SECRET}]}]},
    }
    return objects


@pytest.fixture(scope="module")
def fake() -> Any:
    with FakeKubeAPI() as api:
        api.load_objects(secret_objects())
        yield api


def files_holding(root: Path, needle: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes())


def test_redact_strips_env_values_managed_fields_and_last_applied_only() -> None:
    pod = with_secret(next(o for o in load_objects([EXAMPLE]) if o["kind"] == "Pod"))
    before = copy.deepcopy(pod)
    out = redact(pod)
    assert pod == before, "the input is not changed"
    assert SECRET not in json.dumps(out)
    assert "managedFields" not in out["metadata"] and LAST_APPLIED_ANNOTATION not in out["metadata"]["annotations"]
    assert out["spec"]["containers"][0]["env"] == [
        {"name": "DB_PASSWORD"}, {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"name": "db", "key": "user"}}}
    ]  # fmt: skip
    assert out["spec"]["initContainers"][0]["env"] == [{"name": "TOKEN"}]
    # Everything else is kept as it was.
    for o in (out, before):
        for c in (*o["spec"]["containers"], *o["spec"]["initContainers"]):
            c.pop("env")
        o["metadata"].pop("managedFields", None)
        o["metadata"]["annotations"].pop(LAST_APPLIED_ANNOTATION, None)
    assert out == before


def test_snapshot_strips_secrets_and_writes_private_files(
    fake: FakeKubeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    os.umask(0o022)  # the usual umask: files would be 0644 and directories 0755
    out = tmp_path / "shared" / "snap"
    assert main(["snapshot", "--kubeconfig", str(kubeconfig), "--out", str(out)]) == 0
    capsys.readouterr()
    assert files_holding(out, SECRET) == []
    assert files_holding(out, LAST_APPLIED_ANNOTATION) == [] and files_holding(out, "managedFields") == []
    pods = json.loads((out / "pods.json").read_text())["items"]
    (env,) = [c["env"] for p in pods for c in p["spec"]["containers"] if "env" in c]
    assert env == [{"name": "DB_PASSWORD"}, {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"name": "db", "key": "user"}}}]
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {p.name: 0o600 for p in out.iterdir()}
    # --overwrite replaces files with 0600 ones, whatever mode they had.
    (out / "pods.json").chmod(0o644)
    assert main(["snapshot", "--kubeconfig", str(kubeconfig), "--out", str(out), "--overwrite"]) == 0
    assert stat.S_IMODE((out / "pods.json").stat().st_mode) == 0o600
    # --raw keeps them (the grep above can see the secret when it is there).
    raw = tmp_path / "raw"
    assert main(["snapshot", "--kubeconfig", str(kubeconfig), "--out", str(raw), "--raw"]) == 0
    assert files_holding(raw, SECRET) == ["pods.json", "workloads.json"]
    assert files_holding(raw, LAST_APPLIED_ANNOTATION) == ["pods.json"]
    # Both give the same verdicts.
    capsys.readouterr()
    reports = []
    for snap in (out, raw):
        assert main(["dry-run", "--snapshot", str(snap), "--now", NOW, "-o", "json"]) == 0
        reports.append([(n["name"], n["status"], n["reason"]) for n in json.loads(capsys.readouterr().out)["nodes"]])
    assert reports[0] == reports[1]


def test_write_snapshot_never_follows_a_symlink_at_its_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    out = tmp_path / "snap"
    out.mkdir()
    (out / ".pods.json.tmp").symlink_to(target)
    with pytest.raises(OSError):
        write_snapshot(load_objects([EXAMPLE]), out, overwrite=True)
    assert target.read_text() == "untouched"


def test_nothing_written_from_a_snapshot_repeats_its_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot that does hold secrets (written with --raw, or by kubectl): the dry-run and why
    reports, the replay's reports and the tune's results (what a Ray job writes to its volume)
    repeat none of them."""
    snap = tmp_path / "snap"
    write_snapshot(secret_objects(LOWREQ), snap, raw=True)
    assert files_holding(snap, SECRET)
    node = next(o for o in load_objects([LOWREQ]) if o["kind"] == "Node")["metadata"]["name"]
    outputs: list[str] = []
    for fmt in ("wide", "json", "yaml"):
        assert main(["dry-run", "--snapshot", str(snap), "-o", fmt]) == 0
        outputs.append(capsys.readouterr().out)
        assert main(["why", node, "--snapshot", str(snap), "-o", fmt if fmt != "wide" else "text"]) == 0
        outputs.append(capsys.readouterr().out)
    out = tmp_path / "out"
    out.mkdir()
    for fmt, name in (("json", "replay.json"), ("html", "replay.html")):
        code = main(["replay", "--snapshot", str(snap), "--trace", str(write_trace(tmp_path)), "--output", fmt,
                     "--out", str(out / name), "--policies", "seed,scaler", "--processes", "1", "--quiet"])  # fmt: skip
        assert code == 0, capsys.readouterr().err
    code = main(["tune", "--snapshot", str(snap), "--trace", str(write_trace(tmp_path)), "--trials", "2",
                 "--generation-size", "2", "--workers", "1", "--out", str(out / "tune"), "--quiet"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    outputs += [captured.out, captured.err]
    assert all(SECRET not in text for text in outputs)
    assert files_holding(out, SECRET) == []
    assert (out / "replay.json").stat().st_size > 0
    assert {p.name for p in (out / "tune").iterdir()} >= {"frontier.json", "report.html", "recommended.yaml"}
