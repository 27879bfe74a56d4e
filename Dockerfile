# The service as a container: slim base, non-root user, runs on a read-only root filesystem.
#
#   docker build -t sdc-service:0.1.0 .
#   docker run --read-only --tmpfs /tmp -p 127.0.0.1:8787:8787 sdc-service:0.1.0
#
# Nothing is written at run time: the service's bytecode is compiled into the virtual
# environment while the image is built (unchecked-hash, so copying between stages cannot
# make it stale) and PYTHONDONTWRITEBYTECODE stops Python from trying to write any more; logs go to stdout; metrics live in process memory (one worker process
# per container, SDC_WORKERS=1: scale with replicas, so that every scrape sees the whole
# process). /tmp is the only writable path a deployment needs to give (tmpfs / emptyDir).
# Without SDC_API_KEYS_FILE the service refuses the non-loopback SDC_HOST set here: mount a
# key file (deploy/compose.yaml, deploy/k8s/).
#
# Supply chain: the base image is pinned by digest (the python:3.11-slim index; update it
# with `docker buildx imagetools inspect python:3.11-slim`, README "The image"), and every
# dependency, setuptools included, is installed from requirements.lock, which pins each one
# with its hashes (--require-hashes; wheels only). The project itself goes in without
# dependencies or build isolation, so nothing unhashed is fetched. A PYTHON_IMAGE given
# without a digest fails the build.

ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS build
ARG PYTHON_IMAGE
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY requirements.lock pyproject.toml README.md ./
COPY service ./service
COPY schemas ./schemas
RUN case "$PYTHON_IMAGE" in *@sha256:*) ;; *) echo "PYTHON_IMAGE must be pinned by digest" >&2; exit 1;; esac \
    && python -m venv /opt/sdc \
    && /opt/sdc/bin/pip install --no-cache-dir --require-hashes --only-binary=:all: -r requirements.lock \
    && /opt/sdc/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
    && /opt/sdc/bin/python -m compileall -q -f --invalidation-mode unchecked-hash /opt/sdc/lib

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="sdc-service" \
      org.opencontainers.image.description="Statistical disclosure control for published tables" \
      org.opencontainers.image.version="0.1.0"
RUN groupadd --system --gid 10001 sdc \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin sdc
COPY --from=build /opt/sdc /opt/sdc
ENV PATH=/opt/sdc/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SDC_HOST=0.0.0.0 \
    SDC_PORT=8787 \
    SDC_WORKERS=1
WORKDIR /
USER 10001:10001
EXPOSE 8787
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SDC_PORT', '8787'), timeout=2)"]
STOPSIGNAL SIGTERM
CMD ["sdc-service"]
