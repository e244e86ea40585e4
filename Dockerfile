FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md requirements.lock ./
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements.lock
COPY libs ./libs
COPY services ./services
RUN pip install --no-cache-dir --no-deps --no-build-isolation . && pip check && useradd --create-home turnout
USER turnout
ENV TURNOUT_HOST=0.0.0.0 TURNOUT_PORT=8080
EXPOSE 8080
CMD ["turnout", "ingress"]
