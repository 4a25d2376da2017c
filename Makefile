# Two set-up commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit test-deps lock bench soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## The dry-run on the night-lowreq example bundled inside the package (real Bitbrains usage, low
## requests): its table, then cluster-autoscaler's requests rule and scaler side by side.
demo: $(STAMP)
	$(VENV)/bin/scaler dry-run --snapshot scaler/examples/bitbrains-gke-night-lowreq

## Lint, type-check and run the whole test suite: the three at once (the suite spends much of its
## time waiting), each one's output printed a line at a time; make test fails if any fails. The
## virtualenv is made first, not by the three at once.
test: $(STAMP)
	@$(MAKE) --no-print-directory -j3 --output-sync=line lint typecheck unit

lint: $(STAMP)
	$(VENV)/bin/ruff check scaler plugins tests benchmarks
	$(VENV)/bin/ruff format --check scaler plugins benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy

## The suite runs on TEST_WORKERS processes (pytest-xdist): the tests of a module that share a
## fixture made once (a control plane, built images, a Prometheus) on one worker, every other
## test on any free one (tests/conftest.py's xdist_group): much of its time is spent waiting on
## subprocesses, servers and image builds, not computing.
TEST_WORKERS ?= 4
unit: $(STAMP) test-deps
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25

## System packages some tests run for real, from Debian, installed when missing (as root):
## prometheus and promtool (the Prometheus history tests), chromium (the replay HTML report
## test), etcd-server (the real-apiserver suite, with ../shared/k8s), buildah, podman, runc and
## debootstrap (tests/test_image.py builds and runs the container images without a daemon).
## Where they cannot be installed (not root, no apt-get) those tests skip and say why.
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
IMAGE_TOOLS := buildah podman runc debootstrap
test-deps:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    $(APT_INSTALL) prometheus >/dev/null 2>&1 || { apt-get update -qq && $(APT_INSTALL) prometheus; }; \
	  else echo "test-deps: prometheus is missing and cannot be installed here (needs root and apt-get)"; fi; \
	fi
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    $(APT_INSTALL) chromium >/dev/null 2>&1 || { apt-get update -qq && $(APT_INSTALL) chromium; }; \
	  else echo "test-deps: chromium is missing and cannot be installed here (needs root and apt-get)"; fi; \
	fi
	@if ! command -v etcd >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    $(APT_INSTALL) etcd-server >/dev/null 2>&1 || { apt-get update -qq && $(APT_INSTALL) etcd-server; }; \
	  else echo "test-deps: etcd is missing and cannot be installed here (needs root and apt-get)"; fi; \
	fi
	@if ! command -v buildah >/dev/null || ! command -v podman >/dev/null || ! command -v runc >/dev/null \
	    || ! command -v debootstrap >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    $(APT_INSTALL) $(IMAGE_TOOLS) >/dev/null 2>&1 || { apt-get update -qq && $(APT_INSTALL) $(IMAGE_TOOLS); }; \
	  else echo "test-deps: buildah, podman, runc or debootstrap is missing and cannot be installed here (needs root and apt-get)"; fi; \
	fi

## The container images' lock files, from pyproject.toml, for Linux and Python 3.11 (the images'):
## requirements.lock (the controller image: the dependencies and the build tools) and
## requirements-tune.lock (the tune image: the `tune` extra and ray[default] on the controller's
## pins, requirements-tune.in). Run after changing a dependency in pyproject.toml; it keeps every
## pin that still fits (delete a lock file first to move everything to the newest releases).
## pip-tools runs in a throwaway venv; no local pip configuration, index or find-links enters the
## hashes. About ten minutes (every file's hash is fetched).
LOCK_TOOLS := /tmp/scaler-pip-tools
PIP_COMPILE := env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT \
  PIP_CONFIG_FILE=/dev/null CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_TOOLS)/bin/pip-compile --quiet \
  --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links
lock:
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "make lock needs Python 3.11, as in the image: PYTHON=python3.11 make lock"'
	test -x $(LOCK_TOOLS)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_TOOLS) && $(LOCK_TOOLS)/bin/pip install --quiet pip-tools; }
	$(PIP_COMPILE) --build-deps-for=wheel --output-file=requirements.lock pyproject.toml
	$(PIP_COMPILE) --extra=tune --output-file=requirements-tune.lock pyproject.toml requirements-tune.in

## Benchmarks (tens of minutes): at 1k, 5k and 15k nodes the end-to-end `scaler dry-run` beside its
## msgspec floor, the steady `scaler run` loop against the fake API in another process, and the
## evaluation; writes docs/benchmarks.md/.json/.png. BENCH_ARGS="--sizes 1000,5000" for fewer sizes,
## "--sizes 15000 --merge" to add one size to the saved results. Then the replay benchmark
## (benchmarks/replay.py: steps per second of one policy over generated 100, 1k and 5k-node clusters
## following the Bitbrains trace, a full evaluation beside it, peak RSS, and the bundled example
## against 3c01bc1); REPLAY_ARGS="--sizes 1000 --steps 1000=2016" for other sizes or durations.
## Then `scaler tune` by successive halving (32 trials over a week of a generated 1,000-node
## cluster, then the same trials without halving; needs ../shared): docs/tune-bench.md/.json.
## TUNE_BENCH_ARGS="--halving-nodes 0" for the bundled example, "--configs example,1k-nodes" for
## 1 against 2 workers.
## Then the start of `scaler run` to its first loop, at 100 and 1,000 nodes: docs/startup-bench.md;
## STARTUP_ARGS="--image localhost/scaler-test:controller" adds the controller image that
## tests/test_image.py built (podman).
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) -m benchmarks $(BENCH_ARGS)
	$(PY) -m benchmarks.replay $(REPLAY_ARGS)
	$(PY) -m benchmarks.tune $(TUNE_BENCH_ARGS)
	$(PY) -m benchmarks.startup $(STARTUP_ARGS)

## Soak (30 minutes; needs ../shared/k8s and etcd): two `scaler run` replicas on a real control
## plane under the fault matrix at seeded random times; the safety invariants checked over the
## audit log at the end. SOAK_ARGS="--duration 2m" for a smoke run.
soak: $(STAMP)
	$(PY) -m benchmarks.soak $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
