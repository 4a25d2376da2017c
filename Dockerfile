# syntax=docker/dockerfile:1
#
# scaler's two images, one per job (docs/getting-started/container-image.md):
#
#   docker build -t scaler:dev .                      # the controller: `scaler run`, `scaler dry-run`
#   docker build --target tune -t scaler-tune:dev .   # replay, tune, history export; the RayJob's
#
# The controller image holds what `scaler run` and `scaler dry-run` load and nothing else (no
# Ray, Optuna, pyarrow or plotly); it runs `scaler run` as UID 65532 and writes nothing to its
# root filesystem (the Deployment sets readOnlyRootFilesystem: true). Each build ends by running,
# as that user, what the image is for: `scaler run --help` and an import of every module the
# image's commands load (python -m scaler.selfcheck), so a missing dependency or file fails the
# build, not the first loop.
#
# Dependencies come only from the lock files (pip-compile --generate-hashes, `make lock`):
# requirements.lock for the controller, requirements-tune.lock (a superset, on the same pins) for
# the tune image. Every file pip installs is checked against a pinned sha256, build tools included.
#
# PYTHON_IMAGE is the base of every stage: a Python 3.11 on Debian bookworm with `python` on PATH
# (the lock files are compiled for Python 3.11 on Linux). Pin it by digest for a byte-for-byte
# rebuild, or pass a base of your own (behind a proxy with its own CA: a base that trusts it):
#   docker build --build-arg PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:<digest> -t scaler:dev .
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# ---- deps: a virtualenv with the controller's locked dependencies (cached until the lock changes) --
FROM ${PYTHON_IMAGE} AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# --require-hashes refuses any file whose hash is not in the lock; --no-deps installs exactly the
# locked set; --only-binary runs no third-party build code; --no-compile writes no bytecode (the
# controller's is written below, for the modules it loads only). The wheels are kept in a build
# cache mount (never in a layer) and downloaded only when missing there; each is checked against
# the lock's hashes when it is used, wherever it came from.
COPY requirements.lock ./
RUN --mount=type=cache,target=/root/.cache/scaler-wheels,sharing=locked \
    pip download --require-hashes --no-deps --only-binary=:all: -d /root/.cache/scaler-wheels -r requirements.lock \
 && pip install --require-hashes --no-deps --no-index --find-links /root/.cache/scaler-wheels --no-compile \
      -r requirements.lock

# ---- builder: the scaler wheel, installed; the build tools removed; pip check --------------------
# The wheel is built with the locked setuptools/wheel (no build isolation, so nothing unpinned is
# fetched); then the build tools (pyproject.toml's build-system) leave and `pip check` proves that
# every installed distribution still has what it requires.
FROM deps AS builder
COPY pyproject.toml README.md ./
COPY scaler/ scaler/
COPY plugins/ plugins/
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && pip install --no-deps --no-compile /wheels/gke_scaler-*.whl \
 && pip uninstall -y setuptools wheel \
 && pip check

# ---- the controller's virtualenv: bytecode for what it loads, no pip ------------------------------
# kubernetes/aio is the client's asyncio copy (68 MB of source), which nothing imports unless asked
# for by name and scaler never asks: it leaves, and the self-check below (every module the
# controller loads) proves nothing needed it.
FROM builder AS controller-venv
RUN rm -rf /opt/venv/lib/python3.11/site-packages/kubernetes/aio \
 && python -B -m scaler.selfcheck --compile \
 && pip uninstall -y pip

# ---- the tune image's dependencies: the controller's plus the tune extra (cached with the locks) ---
FROM deps AS tune-deps
COPY requirements-tune.lock ./
RUN --mount=type=cache,target=/root/.cache/scaler-wheels,sharing=locked \
    pip download --require-hashes --no-deps --only-binary=:all: -d /root/.cache/scaler-wheels -r requirements-tune.lock \
 && pip install --require-hashes --no-deps --no-index --find-links /root/.cache/scaler-wheels --no-compile \
      -r requirements-tune.lock \
 && pip uninstall -y setuptools wheel \
 && pip check \
 && python -m compileall -q -f --invalidation-mode unchecked-hash /opt/venv/lib

# ---- tune: scaler replay, scaler tune, scaler history export; the KubeRay RayJob's image -----------
FROM ${PYTHON_IMAGE} AS tune
LABEL org.opencontainers.image.title="scaler-tune" \
      org.opencontainers.image.description="scaler replay and tune, on Ray (KubeRay's RayJob)" \
      org.opencontainers.image.licenses="Apache-2.0"
# KubeRay starts Ray through `bash -lc` (a login shell resets PATH: hence the links in
# /usr/local/bin) and probes Ray's health with wget.
RUN apt-get update \
 && apt-get install -y --no-install-recommends wget \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=tune-deps /opt/venv /opt/venv
# The scaler wheel last (the layers above stay cached until a lock file changes), then `pip check`.
# pip stays in this image: Ray's runtime environments may use it. The wheel is copied, not
# bind-mounted from the builder stage: buildah cannot mount a stage it took from its layer cache.
COPY --from=builder /wheels /tmp/wheels
RUN PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    pip install --no-deps --no-compile /tmp/wheels/gke_scaler-*.whl \
 && rm -rf /tmp/wheels \
 && pip check \
 && python -m compileall -q -f --invalidation-mode unchecked-hash /opt/venv/lib/python3.11/site-packages/scaler \
      /opt/venv/lib/python3.11/site-packages/plugins \
 && ln -s /opt/venv/bin/scaler /opt/venv/bin/ray /usr/local/bin/
USER 65532:65532
WORKDIR /tmp
RUN scaler tune --help > /dev/null \
 && bash -lc 'ray --version' > /dev/null \
 && python -m scaler.selfcheck --tune
CMD ["scaler", "--help"]

# ---- controller (the default target): `scaler run` -----------------------------------------------
FROM ${PYTHON_IMAGE} AS controller
LABEL org.opencontainers.image.title="scaler" \
      org.opencontainers.image.description="Usage-based scale-down for Kubernetes on GKE" \
      org.opencontainers.image.licenses="Apache-2.0"
# Read-only root filesystem: the bytecode was written in the builder, none is written here;
# HOME points at /tmp (an emptyDir in the Deployment) for any library that insists on a home.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=controller-venv /opt/venv /opt/venv
# 65532: the conventional "nonroot" UID/GID; numeric so that runAsNonRoot can verify it.
USER 65532:65532
WORKDIR /tmp
EXPOSE 8085
# What the Deployment runs, as its user: the flags parse, and every module loads.
RUN scaler run --help > /dev/null \
 && python -m scaler.selfcheck
ENTRYPOINT ["scaler", "run"]
