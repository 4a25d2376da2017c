# syntax=docker/dockerfile:1
#
# The scaler controller image: `scaler run` as UID 65532, no shell needed at run time, and nothing
# written to the root filesystem (the Deployment sets readOnlyRootFilesystem: true).
#
#   docker build -t scaler:dev .
#
# Dependencies come only from requirements.lock (pip-compile --generate-hashes, checked in), so
# every file pip installs is checked against a pinned sha256, build tools included.
#
# The base is pinned to a Python patch release on Debian bookworm. To pin it byte for byte, add
# its digest (the digest of the tag on the day you build, for every platform):
#   docker buildx imagetools inspect python:3.11.13-slim-bookworm --format '{{json .Manifest.Digest}}'
#   docker build --build-arg PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:<digest> -t scaler:dev .
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# ---- builder: a virtualenv with the locked dependencies and the scaler wheel ------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

# 1. The lock file alone first, so this layer is cached until the lock changes. --require-hashes
#    refuses any file whose hash is not in the lock; --no-deps installs exactly the locked set;
#    --only-binary runs no third-party build code.
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps --only-binary=:all: -r requirements.lock

# 2. The project wheel, built with the locked setuptools/wheel (no build isolation, so nothing
#    unpinned is fetched), then the build tools and pip are removed from the runtime venv.
COPY pyproject.toml README.md ./
COPY scaler/ scaler/
COPY plugins/ plugins/
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && pip install --no-deps /wheels/gke_scaler-*.whl \
 && pip uninstall -y setuptools wheel packaging \
 && pip check \
 && python -m compileall -q -f --invalidation-mode unchecked-hash /opt/venv/lib \
 && pip uninstall -y pip \
 && /opt/venv/bin/scaler run --help > /dev/null

# ---- runtime -----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="scaler" \
      org.opencontainers.image.description="Usage-based scale-down for Kubernetes on GKE" \
      org.opencontainers.image.licenses="Apache-2.0"
# Read-only root filesystem: bytecode is precompiled in the builder and never written here;
# HOME points at /tmp (an emptyDir in the Deployment) for any library that insists on a home.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=builder /opt/venv /opt/venv
# 65532: the conventional "nonroot" UID/GID; numeric so that runAsNonRoot can verify it.
USER 65532:65532
WORKDIR /tmp
EXPOSE 8085
ENTRYPOINT ["scaler", "run"]
