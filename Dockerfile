# syntax=docker/dockerfile:1
# One image for every vgpu component: `vgpu node-agent`, `vgpu extender`, `vgpu inspect` /
# `kubectl-inspect-vgpu`, `vgpu simulate`. Build: docker build -t vgpu/vgpu:0.1.0 .
#
# The image runs as the unprivileged user vgpu (uid 10001). The node agent's DaemonSet
# overrides that with runAsUser: 0, because the kubelet's device-plugin directory and
# pod-resources socket are root-owned (it still drops every capability and keeps a read-only
# root filesystem); see daemonset/node-agent.yaml.
#
# The image carries vgpu-core, vgpu's CUDA interposer, at /opt/vgpu/lib/libvgpu-core.so, built
# by hack/build-interposer.sh (the same command CI runs); the node agent checks it at start and
# installs it on the host for mode vgpu-core (docs/isolation.md). The same build makes the DRA
# driver's CDI hook, /opt/vgpu/bin/vgpu-cdi-hook, which the driver installs on the host under its
# memory limits.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS interposer
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY vgpu-core/src vgpu-core/src
COPY vgpu-core/hook vgpu-core/hook
COPY hack/build-interposer.sh hack/build-interposer.sh
RUN bash hack/build-interposer.sh /out

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# .dockerignore keeps tests, docs, manifests and caches out of the context.
COPY . .
RUN python -m venv /opt/vgpu \
    && /opt/vgpu/bin/pip install --no-cache-dir ".[node,extender,cli]" \
    && /opt/vgpu/bin/python -m compileall -q /opt/vgpu/lib

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="vgpu" \
      org.opencontainers.image.description="GPU sharing for Kubernetes: node agent, scheduler extender, kubectl inspect vgpu" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/vgpu/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 vgpu \
    && useradd --system --uid 10001 --gid vgpu --no-create-home --shell /usr/sbin/nologin vgpu
COPY --from=build /opt/vgpu /opt/vgpu
COPY --from=interposer /out/libvgpu-core.so /opt/vgpu/lib/libvgpu-core.so
COPY --from=interposer /out/vgpu-cdi-hook /opt/vgpu/bin/vgpu-cdi-hook
USER 10001:10001
ENTRYPOINT ["vgpu"]
CMD ["--help"]
