FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md requirements.lock ./
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements.lock
COPY libs ./libs
COPY services ./services
RUN pip install --no-cache-dir --no-deps --no-build-isolation . && pip check && useradd --create-home turnout
# `turnout ingress`/`worker` restart themselves under -OO (turnout_cli.optimize): compile the
# .opt-2.pyc files now, as the Kubernetes manifests mount the root filesystem read-only.
RUN python -OO -m compileall -q -j 0 -x '/(test|tests|lib2to3|idlelib|turtledemo)/' /usr/local/lib/python3.11
USER turnout
ENV TURNOUT_HOST=0.0.0.0 TURNOUT_PORT=8080
EXPOSE 8080
CMD ["turnout", "ingress"]
