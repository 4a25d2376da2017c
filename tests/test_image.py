"""The container images, built and run as an operator would on a machine without a Docker daemon.

buildah (Debian's package: ``make test-deps``) builds both targets of the ``Dockerfile`` with
chroot isolation and the overlay storage driver where the kernel mounts it (else vfs, or as
``$SCALER_IMAGE_STORAGE_DRIVER`` says: vfs copies the whole file system for each layer and each
container, and a first run takes several times as long), on a Debian bookworm base made here with debootstrap
(minbase, ``python3.11`` and ``venv``, slimmed as Debian's ``-slim`` images are, ``python`` on
PATH as in the official Python images) from the mirror this machine's apt already uses, carrying
this machine's CA bundle so that pip inside the build trusts what the machine trusts (a proxy
that intercepts TLS included). The base goes in as the Dockerfile's own ``PYTHON_IMAGE``. podman
then runs the controller image as ``deploy/base/deployment.yaml`` runs it: its user (UID 65532),
a read-only root filesystem with only ``/tmp`` writable, the config file mounted at
``/etc/scaler``, the Deployment's flags:

* ``scaler --version``; ``scaler dry-run --snapshot`` of the bundled example, whose decisions equal
  this tree's; ``scaler run`` against the loopback Kubernetes and GCE fakes (on this machine's
  loopback: the container shares its network) reaching its first loop and serving ``/healthz``
  and ``/metrics``, then stopping cleanly on SIGTERM;
* ``pip check`` in both images (the host's pip, mounted read-only: the images have none); the
  controller image's distributions are exactly its lock file's (no Ray, Optuna, pyarrow or
  plotly), those listed in ``docs/getting-started/container-image.md``, and ``scaler replay``
  there stops with one line naming the tune extra; the tune image runs ``scaler tune`` and Ray
  from a login shell as KubeRay starts it.

The build itself ends with ``pip check``, ``scaler run --help`` and ``python -m scaler.selfcheck``
as the image's user: a dependency missing from a lock file, or a file of the package not sent to
the build, fails there or in the runs above.

It skips, saying why, where it cannot run: not root, buildah, podman, runc or debootstrap missing
(``make test-deps`` installs them as root), or a container cannot start on this machine.

Cached between runs on one machine, in ``$SCALER_IMAGE_CACHE`` (default
``~/.cache/scaler-image-test``), one run at a time (a lock file): the base image, keyed by all
that went into it (mirror, suite, packages, debootstrap's version, the CA bundle, this recipe);
the Debian packages debootstrap fetched; the wheels pip downloaded (the build's cache mount:
every wheel is checked against the lock's hashes whenever it is used); with overlay storage, the
layers that depend on the lock files alone (the ``deps`` and ``tune-deps`` stages, tagged
``localhost/scaler-test-cache:*``). What depends on this tree's sources is built afresh every run; the last ones stay tagged ``localhost/scaler-test:controller``
and ``localhost/scaler-test:tune`` for a look (``podman --root <cache>/storage …``), and a run's
timings and sizes are written to ``<cache>/last-run.json``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_cluster import E2ECluster, WallClock
from waiting import wait_for

import scaler
from benchmarks.startup import free_port, http_get
from scaler.cmdline import TUNE_EXTRA_MODULES

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("SCALER_IMAGE_CACHE") or Path.home() / ".cache" / "scaler-image-test")
SUITE = "bookworm"
BASE_PACKAGES = ("python3.11", "python3.11-venv", "python3-distutils", "ca-certificates")
BASE_RECIPE = "2"
"""Bumped whenever :func:`_make_base_rootfs` changes what it makes: a new key, a new base."""
CONTROLLER = "localhost/scaler-test:controller"
TUNE = "localhost/scaler-test:tune"
EXAMPLE = "bitbrains-gke-night-lowreq"
SITE_PACKAGES = "/opt/venv/lib/python3.11/site-packages"
BUILD_TIMEOUT = 3600
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


# -- what the machine provides ----------------------------------------------------------------------


def apt_mirror(suite: str = SUITE) -> str:
    """The Debian mirror this machine's apt uses for ``suite`` (or, failing that, for any Debian
    suite but security), from ``/etc/apt/sources.list`` and ``/etc/apt/sources.list.d/`` (one-line
    and deb822 formats).

    Raises:
        LookupError: apt names no Debian mirror.
    """
    entries: list[tuple[str, list[str]]] = []  # (URI, suites) of every "deb" source
    etc = Path("/etc/apt")
    one_line = [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]
    for path in one_line:
        for line in path.read_text().splitlines() if path.is_file() else []:
            m = re.match(r"\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m:
                entries.append((m[1], [m[2]]))
    for path in sorted((etc / "sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text()):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
            if "deb" in fields.get("Types", "").split() and fields.get("Enabled", "yes") != "no":
                for uri in fields.get("URIs", "").split():
                    entries.append((uri, fields.get("Suites", "").split()))
    debian = [(u.rstrip("/"), s) for u, s in entries if "security" not in u and not any("security" in x for x in s)]
    for uri, suites in debian:
        if suite in suites:
            return uri
    for uri, suites in debian:
        if any(x.split("-")[0] in ("bookworm", "trixie", "forky", "stable", "oldstable") for x in suites):
            return uri
    raise LookupError("apt names no Debian mirror in /etc/apt/sources.list{,.d}")


def ca_bundle() -> Path:
    """This machine's CA bundle (what its TLS clients trust), a PEM file."""
    for candidate in (os.environ.get("SSL_CERT_FILE"), ssl.get_default_verify_paths().cafile,
                      "/etc/ssl/certs/ca-certificates.crt"):  # fmt: skip
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise LookupError("no CA bundle on this machine")


def _missing_prerequisite() -> str:
    """Why the images cannot be built and run here, or ``""``."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "building images needs root on Linux (buildah with chroot isolation, debootstrap)"
    missing = [t for t in ("buildah", "podman", "runc", "debootstrap") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not installed (make test-deps installs them from Debian as root)"
    try:
        apt_mirror()
        ca_bundle()
    except (LookupError, OSError) as e:
        return str(e)
    return ""


# -- buildah and podman on one storage ------------------------------------------------------------------


def storage_driver(root: Path) -> str:
    """``overlay`` where this kernel mounts it for buildah here (a copy-free layer per step), else
    ``vfs`` (a full copy of the file system per layer and per container: slow, but it works
    everywhere); ``$SCALER_IMAGE_STORAGE_DRIVER`` chooses."""
    forced = os.environ.get("SCALER_IMAGE_STORAGE_DRIVER")
    if forced:
        return forced
    probe = Containers(root, "overlay")
    made = probe.buildah("from", "scratch", check=False)
    if made.returncode != 0:
        return "vfs"
    ctr = made.stdout.strip()
    mounted = probe.buildah("mount", ctr, check=False).returncode == 0
    probe.buildah("rm", ctr, check=False)
    return "overlay" if mounted else "vfs"


@dataclass
class Containers:
    """buildah and podman sharing one storage under ``root`` (the cache), one per driver."""

    root: Path
    driver: str
    timings: dict[str, float] = field(default_factory=dict)
    base: str = ""

    @property
    def storage(self) -> list[str]:
        return [
            "--root", str(self.root / f"storage-{self.driver}"), "--runroot", str(self.root / f"run-{self.driver}"),
            "--storage-driver", self.driver,
        ]  # fmt: skip

    @property
    def env(self) -> dict[str, str]:
        # buildah keeps the build's cache mounts (the wheels) under $TMPDIR: in the cache. A
        # proxy set here reaches the build (buildah passes HTTP(S)_PROXY into RUN steps).
        return {**os.environ, "TMPDIR": str(self.root / "tmp")}

    def buildah(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run(["buildah", *self.storage, *args], timeout, check)

    def podman(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        # This kind of machine: cgroups v1 and v2 mixed (runc, cgroupfs), no journald (file
        # events), open-file and process limits no higher than the machine's own.
        flags = [
            *self.storage, "--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
            "--tmpdir", str(self.root / f"podman-{self.driver}"),
        ]  # fmt: skip
        return self._run(["podman", *flags, *args], timeout, check)

    def _run(self, cmd: list[str], timeout: float, check: bool) -> subprocess.CompletedProcess[str]:
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env, check=False)
        if check and done.returncode != 0:
            shown = " ".join(a for a in cmd if not a.startswith(str(self.root)))
            raise AssertionError(f"{shown} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
        return done

    def has_image(self, ref: str) -> bool:
        return self.buildah("images", "-q", ref, check=False).returncode == 0

    def timed(self, what: str) -> contextlib.AbstractContextManager[None]:
        return _timer(self.timings, what)


@contextlib.contextmanager
def _timer(into: dict[str, float], what: str) -> Iterator[None]:
    start = time.monotonic()
    yield
    into[what] = round(time.monotonic() - start, 1)


# -- the base: Debian bookworm with Python 3.11, made here ---------------------------------------------------


def base_key(mirror: str, bundle: Path) -> str:
    """What went into the base, hashed: a new key makes a new base."""
    version = subprocess.run(["debootstrap", "--version"], capture_output=True, text=True, check=False).stdout
    parts = {
        "recipe": BASE_RECIPE, "suite": SUITE, "mirror": mirror, "packages": BASE_PACKAGES,
        "debootstrap": version.strip(), "arch": platform.machine(),
        "ca": hashlib.sha256(bundle.read_bytes()).hexdigest(),
    }  # fmt: skip
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _make_base_rootfs(rootfs: Path, mirror: str, bundle: Path, debs: Path) -> None:
    """debootstrap a minbase bookworm with Python 3.11 into ``rootfs``, then make it what the
    Dockerfile expects of ``PYTHON_IMAGE`` and no more."""
    debs.mkdir(parents=True, exist_ok=True)
    cmd = [
        "debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", f"--cache-dir={debs}",
        SUITE, str(rootfs), mirror,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        log = rootfs / "debootstrap" / "debootstrap.log"
        tail = log.read_text()[-3000:] if log.is_file() else ""
        raise AssertionError(f"debootstrap from {mirror} failed:\n{done.stderr[-3000:]}\n{tail}")
    # The machine's CA bundle, as the system's: Debian's pip and Python's ssl read it.
    shutil.copyfile(bundle, rootfs / "etc/ssl/certs/ca-certificates.crt")
    # `python` and `python3` on PATH, as in the official Python images.
    for name in ("python", "python3"):
        link = rootfs / "usr/local/bin" / name
        link.unlink(missing_ok=True)
        link.symlink_to("/usr/bin/python3.11")
    # Slim, as Debian's -slim images: no package caches, lists, manuals, docs or translations
    # (and none installed later).
    (rootfs / "etc/dpkg/dpkg.cfg.d/slim").write_text(
        "path-exclude /usr/share/doc/*\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\n"
        "path-exclude /usr/share/locale/*\npath-include /usr/share/locale/locale.alias\n"
    )
    for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*", "usr/share/doc/*", "usr/share/man/*",
                    "usr/share/info/*", "debootstrap"):  # fmt: skip
        for path in rootfs.glob(pattern):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    for path in (rootfs / "usr/share/locale").iterdir():
        if path.name != "locale.alias":
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def ensure_base(c: Containers) -> str:
    """The base image (made once per key, then taken from the cache); its reference."""
    mirror, bundle = apt_mirror(), ca_bundle()
    ref = f"localhost/scaler-test-base:{base_key(mirror, bundle)}"
    if c.has_image(ref):
        return ref
    work = c.root / "base-work"
    shutil.rmtree(work, ignore_errors=True)
    rootfs, tar = work / "rootfs", work / "rootfs.tar"
    with c.timed("base: debootstrap"):
        _make_base_rootfs(rootfs, mirror, bundle, c.root / "debs")
    with c.timed("base: image"):
        excludes = [f"--exclude=./{d}/*" for d in ("dev", "proc", "sys", "tmp")]
        subprocess.run(["tar", "-C", str(rootfs), *excludes, "-cf", str(tar), "."], check=True, timeout=600)
        ctr = c.buildah("from", "scratch").stdout.strip()
        try:
            c.buildah("add", ctr, str(tar), "/")
            c.buildah("config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                      "--env", "LANG=C.UTF-8", "--cmd", "python3", ctr)  # fmt: skip
            c.buildah("commit", "--rm", ctr, ref)
        except BaseException:
            c.buildah("rm", ctr, check=False)
            raise
    shutil.rmtree(work, ignore_errors=True)
    for line in c.buildah("images", "--format", "{{.Name}}:{{.Tag}}").stdout.split():
        if line.startswith("localhost/scaler-test-base:") and line != ref:
            c.buildah("rmi", line, check=False)  # an older base
    return ref


# -- the images -----------------------------------------------------------------------------------------


@dataclass
class Images:
    c: Containers
    base: str
    sizes: dict[str, int]


CACHED_STAGES = ("deps", "tune-deps")
"""The Dockerfile's stages that depend on the lock files alone: kept tagged between runs (with
overlay storage), so that a run rebuilds only what depends on the sources."""


def build(c: Containers, base: str, target: str, tag: str) -> None:
    """``buildah build --target TARGET`` of this tree's Dockerfile on ``base``: with overlay
    storage, each step's layer cached as Docker caches it (``--layers``); with vfs, where every
    layer is a full copy, none."""
    c.buildah(
        "build", "--isolation", "chroot", f"--layers={'true' if c.driver == 'overlay' else 'false'}",
        "--build-arg", f"PYTHON_IMAGE={base}", "--target", target, "--tag", tag,
        "--file", str(REPO / "Dockerfile"), str(REPO), timeout=BUILD_TIMEOUT,
    )  # fmt: skip


def prune(c: Containers) -> None:
    """Remove every image but the tagged ones and their layers: what the last builds replaced."""
    if c.driver == "overlay":  # tag the lock-only stages (cache hits: seconds), kept for the next run
        for stage in CACHED_STAGES:
            build(c, c.base, stage, f"localhost/scaler-test-cache:{stage}")
    for _ in range(20):  # an image whose only child was removed is removed next time round
        before = c.buildah("images", "-a", "-q").stdout.split()
        c.buildah("rmi", "--prune", check=False)
        if c.buildah("images", "-a", "-q").stdout.split() == before:
            break


@pytest.fixture(scope="module")
def images() -> Iterator[Images]:
    reason = _missing_prerequisite()
    if reason:
        pytest.skip(reason)
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one run at a time on this cache
        c = Containers(CACHE, storage_driver(CACHE))
        c.buildah("rm", "--all", check=False)  # working containers an interrupted run left
        c.podman("rm", "--all", "--force", check=False)
        with c.timed("base"):
            c.base = ensure_base(c)
        _can_run_containers(c, c.base)
        with c.timed("build: controller"):
            build(c, c.base, "controller", CONTROLLER)
        with c.timed("build: tune"):
            build(c, c.base, "tune", TUNE)
        with c.timed("prune"):
            prune(c)
        sizes = {ref: _size(c, ref) for ref in (c.base, CONTROLLER, TUNE)}
        yield Images(c, c.base, sizes)
        c.podman("rm", "--all", "--force", check=False)
        record = {
            "storage_driver": c.driver, "timings_s": c.timings, "sizes_bytes": sizes,
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }  # fmt: skip
        (CACHE / "last-run.json").write_text(json.dumps(record, indent=1) + "\n")


def _can_run_containers(c: Containers, base: str) -> None:
    """Skip, with podman's own words, where no container can start on this machine."""
    done = c.podman("run", "--rm", *_LIMITS, "--network", "host", base, "true", timeout=300, check=False)
    if done.returncode != 0:
        pytest.skip(f"podman cannot run a container here: {done.stderr.strip()[-500:]}")


def _size(c: Containers, ref: str) -> int:
    out = c.podman("image", "inspect", "--format", "{{.Size}}", ref).stdout.strip()
    return int(out)


_LIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]


def _config(c: Containers, ref: str) -> dict[str, Any]:
    doc = json.loads(c.podman("image", "inspect", ref).stdout)[0]
    return doc["Config"]  # type: ignore[no-any-return]


# -- running the controller as the Deployment runs it ---------------------------------------------------------


def deployment_container() -> dict[str, Any]:
    doc = yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())
    return doc["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


def as_deployed(*extra: str, mounts: tuple[tuple[Path, str], ...] = ()) -> list[str]:
    """``podman run`` flags that run a container as deploy/base/deployment.yaml runs scaler's:
    its user, a read-only root filesystem with ``/tmp`` writable, the config file at
    ``/etc/scaler``, on this machine's network (the fakes listen on its loopback)."""
    spec = deployment_container()
    context = spec["securityContext"]
    assert context["readOnlyRootFilesystem"] is True and context["runAsNonRoot"] is True
    pod = yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())["spec"]["template"]["spec"]
    user = f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"
    flags = ["--read-only", "--user", user, "--tmpfs", "/tmp:rw,size=64m", "--network", "host", *_LIMITS,
             "--cap-drop", "all", "--security-opt", "no-new-privileges"]  # fmt: skip
    flags += ["-v", f"{REPO / 'deploy/base/config.yaml'}:/etc/scaler/config.yaml:ro"]
    for host, inside in mounts:
        flags += ["-v", f"{host}:{inside}:ro"]
    return [*flags, *extra]


def host_pip() -> Path:
    """This interpreter's pip package, to mount into an image that has none."""
    import pip

    return Path(pip.__file__).parent


PIP_MOUNT = (host_pip(), "/opt/pip-check/pip")








def _first_loop_done(metrics: str) -> bool:
    """A loop finished (its end time is set) and this replica leads."""
    m = re.search(r'^scaler_last_activity\{activity="main"\} (\S+)$', metrics, re.M)
    return m is not None and float(m[1]) > 0 and re.search(r"^scaler_is_leader 1\.0$", metrics, re.M) is not None


@pytest.fixture(scope="module")
def controller(images: Images, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``scaler run`` in the controller image against the loopback fakes, as deployed, until
    its first loop and its health and metrics answers; then SIGTERM. Its name stays for
    ``podman exec``-free checks: the container is gone afterwards; what it showed is returned."""
    c = images.c
    tmp = tmp_path_factory.mktemp("controller")
    with E2ECluster(tmp, clock=WallClock()) as cluster:  # type: ignore[arg-type]
        kubeconfig = cluster.kube.write_kubeconfig(tmp / "kubeconfig")
        kubeconfig.chmod(0o644)  # readable by the image's user
        port = free_port()
        args = [
            *deployment_container()["args"], "--kubeconfig=/etc/scaler-test/kubeconfig", f"--address=127.0.0.1:{port}",
            "--namespace=scaler-system", "--gke-project=acme", "--gke-location=europe-west1", "--gke-cluster=prod",
        ]  # fmt: skip
        name = f"scaler-test-run-{os.getpid()}"
        flags = as_deployed("--name", name, "-d", "-e", "POD_NAME=scaler-0", "-e", f"SCALER_GCE_API_ENDPOINT={cluster.gce.url}",
                            mounts=((kubeconfig, "/etc/scaler-test/kubeconfig"),))  # fmt: skip
        started = time.monotonic()
        c.podman("run", *flags, CONTROLLER, *args, timeout=600)
        try:
            base = f"http://127.0.0.1:{port}"

            def ready() -> tuple[int, str] | None:
                if c.podman("inspect", "--format", "{{.State.Running}}", name, check=False).stdout.strip() != "true":
                    raise AssertionError("scaler run exited:\n" + c.podman("logs", name, check=False).stderr[-4000:])
                code, text = http_get(f"{base}/metrics")
                return (code, text) if code == 200 and _first_loop_done(text) else None

            _, metrics = wait_for(ready, 600, "scaler run's first loop (scaler_last_activity{activity=\"main\"})", poll=1.0)
            c.timings["run: container start to first loop"] = round(time.monotonic() - started, 1)
            health = http_get(f"{base}/healthz")
            stop = c.podman("stop", "--time", "60", name, timeout=120, check=False)
            exit_code = c.podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
            logs = c.podman("logs", name, check=False)
            yield {
                "metrics": metrics, "healthz": health, "exit_code": exit_code, "stop": stop,
                "logs": logs.stdout + logs.stderr, "requests": list(cluster.kube.requests),
            }  # fmt: skip
        finally:
            c.podman("rm", "--force", name, check=False)


def in_image(images: Images, ref: str, *cmd: str, entrypoint: str = "scaler", pip: bool = False,
             timeout: float = 600) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``cmd`` in a new container of ``ref``, as deployed (read-only root, the image's user…)."""
    mounts = (PIP_MOUNT,) if pip else ()
    extra = ["-e", "PYTHONPATH=/opt/pip-check"] if pip else []
    flags = as_deployed("--rm", "--entrypoint", entrypoint, *extra, mounts=mounts)
    return images.c.podman("run", *flags, ref, *cmd, timeout=timeout, check=False)


# -- the tests ------------------------------------------------------------------------------------------


def test_the_controller_image_is_configured_as_the_deployment_expects(images: Images) -> None:
    config = _config(images.c, CONTROLLER)
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["scaler", "run"]
    assert "8085/tcp" in config["ExposedPorts"]
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["HOME"] == "/tmp" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    done = in_image(images, CONTROLLER, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == scaler.__version__


def test_the_controller_image_dry_runs_the_bundled_example_as_this_tree_does(images: Images) -> None:
    """As UID 65532 on a read-only root filesystem; the same decisions as this tree's dry-run."""
    example = f"{SITE_PACKAGES}/scaler/examples/{EXAMPLE}"
    done = in_image(images, CONTROLLER, "dry-run", "--snapshot", example, "-o", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    here = subprocess.run(
        [sys.executable, "-m", "scaler.cli", "dry-run", "--snapshot", str(REPO / "scaler/examples" / EXAMPLE), "-o", "json"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    assert _decisions(done.stdout) == _decisions(here.stdout)


def _decisions(report: str) -> Any:
    """A dry-run JSON report without the path it was read from."""
    doc = json.loads(report)
    doc.pop("source")
    return doc


def test_the_controller_image_runs_scaler_run_to_its_first_loop(controller: dict[str, Any]) -> None:
    assert controller["healthz"][0] == 200, controller["logs"][-3000:]
    assert "scaler_is_leader 1.0" in controller["metrics"]
    assert controller["stop"].returncode == 0 and controller["exit_code"] == "0", controller["logs"][-3000:]
    assert "signal 15: shutting down" in controller["logs"]
    assert "Traceback" not in controller["logs"], controller["logs"][-3000:]
    assert any(r.path.endswith("/selfsubjectaccessreviews") for r in controller["requests"])


def test_pip_check_passes_in_both_images(images: Images) -> None:
    for ref in (CONTROLLER, TUNE):
        done = in_image(images, ref, "-m", "pip", "check", entrypoint="python", pip=True)
        assert done.returncode == 0 and "No broken requirements found" in done.stdout, f"{ref}: {done.stdout}{done.stderr}"


def test_the_controller_image_holds_its_lock_file_and_no_tune_extra(images: Images) -> None:
    code = "import importlib.metadata as m, json; print(json.dumps([(d.metadata['Name'], d.version) for d in m.distributions()]))"
    done = in_image(images, CONTROLLER, "-c", code, entrypoint="python")
    assert done.returncode == 0, done.stderr
    installed = {_canonical(n): v for n, v in json.loads(done.stdout)}
    locked = lock_pins(REPO / "requirements.lock")
    expected = {n: v for n, v in locked.items() if n not in BUILD_TOOLS} | {"gke-scaler": scaler.__version__}
    assert installed == expected
    assert not set(installed) & {"ray", "optuna", "pyarrow", "plotly"}


def test_replay_in_the_controller_image_names_the_tune_extra(images: Images, tmp_path: Path) -> None:
    example = REPO / "scaler/examples" / EXAMPLE
    pods = json.loads((example / "pods.json").read_text())["items"][:3]
    rows = ["timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes"]
    rows += [f"{1373241600 + 300 * k},{p['metadata']['namespace']},{p['metadata']['name']},0.1,100000000"
             for p in pods for k in range(13)]  # fmt: skip
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(rows) + "\n")
    trace.chmod(0o644)
    flags = as_deployed("--rm", "--entrypoint", "scaler", mounts=((trace, "/data/trace.csv"),))
    done = images.c.podman(
        "run", *flags, CONTROLLER, "replay", "--snapshot", f"{SITE_PACKAGES}/scaler/examples/{EXAMPLE}",
        "--trace", "/data/trace.csv", "--workers", "2", check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("scaler: error: scaler replay needs ") and "gke-scaler[tune]" in line, done.stderr
    assert any(f"needs {m}," in line for m in TUNE_EXTRA_MODULES), line


def test_the_tune_image_runs_tune_and_ray_as_kuberay_starts_them(images: Images) -> None:
    """KubeRay runs its containers' commands through ``bash -lc`` (a login shell: PATH reset)."""
    done = in_image(images, TUNE, "-lc", "scaler --version && ray --version && scaler tune --help >/dev/null && command -v wget",
                    entrypoint="bash")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert scaler.__version__ in done.stdout and "ray, version" in done.stdout


def test_the_controller_image_is_a_fraction_of_the_tune_image(images: Images) -> None:
    """Half the tune image at most, and both sizes as the guide's table gives them (within 3%:
    the base's packages move with Debian's point releases)."""
    controller, tune = images.sizes[CONTROLLER], images.sizes[TUNE]
    assert controller * 2 < tune, images.sizes
    table = (REPO / "docs/getting-started/container-image.md").read_text(encoding="utf-8")
    quoted = {m[0]: float(m[1].replace(",", "")) * 1e6 for m in re.findall(r"^\| `(\w+)`.*\| ([\d,]+) MB \|$", table, re.M)}
    for target, size in (("controller", controller), ("tune", tune)):
        assert abs(quoted[target] - size) <= 0.03 * size, f"the guide says {quoted[target] / 1e6:,.0f} MB for {target}, built {size / 1e6:,.0f} MB"


# -- the lock file ------------------------------------------------------------------------------------------

BUILD_TOOLS = frozenset({"setuptools", "wheel"})
"""pyproject.toml's build-system: in the lock for the build, removed from the image after it."""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(path: Path) -> dict[str, str]:
    """Canonical name → version of a pip-compile lock file."""
    pins: dict[str, str] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text()):
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", block)
        if m:
            pins[_canonical(m[1])] = m[2]
    return pins
