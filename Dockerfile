# Turnout's image: one image for every process, chosen by command:
#   turnout ingress (the default), turnout worker, turnout sim --host 0.0.0.0
# Built from the wheel: stage `build` builds it and installs it with the runtime lock
# (hashes checked) into a virtualenv; the final stage is the Python base with that
# virtualenv, run as a non-root user (uid 1000, as infra/k8s expects).
#   docker build -t turnout:0.1.0 .      podman build --format docker -t turnout:0.1.0 .
# PYTHON_IMAGE: any Debian-like image with python3 (3.11 or later) and its venv module;
# scripts/image-check builds one from Debian's packages when no image registry is reachable.
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
# Secret `pip-ca` (optional): a CA bundle for pip, where a proxy re-signs TLS (`--secret id=pip-ca,src=FILE`).
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m venv /opt/turnout \
 && /opt/turnout/bin/pip install -q --require-hashes --no-deps -r requirements.lock
COPY libs ./libs
COPY services ./services
# The lock holds the build backend (hatchling and what it alone needs) too: used for the wheel, then
# removed with pip itself, so the image keeps the runtime dependencies only (`pip check` says none is missing).
RUN /opt/turnout/bin/pip wheel -q --no-deps --no-build-isolation -w /dist . \
 && /opt/turnout/bin/pip install -q --no-deps /dist/turnout-*.whl \
 && /opt/turnout/bin/pip uninstall -q -y hatchling pathspec pluggy tomlkit trove-classifiers \
 && /opt/turnout/bin/pip check \
 && /opt/turnout/bin/pip uninstall -q -y pip \
 && /opt/turnout/bin/turnout --version

FROM ${PYTHON_IMAGE}
RUN useradd --uid 1000 --user-group --create-home --shell /usr/sbin/nologin turnout
COPY --from=build /opt/turnout /opt/turnout
ENV PATH=/opt/turnout/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    TURNOUT_HOST=0.0.0.0 TURNOUT_PORT=8080 TURNOUT_CONFIG=/etc/turnout/turnout.yaml
# `turnout ingress`/`worker` restart themselves under -OO (turnout_cli.optimize): compile the .opt-2.pyc
# files of the standard library and the virtualenv now, as the Kubernetes manifests mount the root
# filesystem read-only.
RUN python3 -OO -m compileall -q -j 0 -x '/(test|tests|lib2to3|idlelib|turtledemo)/' \
      "$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')" /opt/turnout/lib
USER turnout
WORKDIR /home/turnout
EXPOSE 8080
# One check for the three commands (turnout_cli.healthcheck): the ingress's /health/liveness, the
# simulator's port, a worker's metrics port when TURNOUT_METRICS_PORT is set.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 CMD ["turnout", "healthcheck"]
CMD ["turnout", "ingress"]
