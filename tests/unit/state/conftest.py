"""Fixtures for the state stores: a real `redis-server` for the whole session.

The server runs on 127.0.0.1 with a free port and no persistence
(`--save "" --appendonly no`). In CI (`CI=true`) a missing `redis-server` is
a failure, not a skip. Each test gets a fresh client on a flushed database.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis

from turnout.state.pool import BufferCheckedPool


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(url: str) -> bool:
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=0.2, socket_timeout=0.5) as client:
            return bool(client.ping())
    except redis.exceptions.RedisError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _start(server: str, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    log_path = workdir / f"redis-{port}.log"
    with open(log_path, "wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [
                server,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
                "--loglevel",
                "warning",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:  # e.g. the port was taken in between: the caller retries
            break
        if _ping(url):
            return proc, url
        time.sleep(0.05)
    _stop(proc)
    raise RuntimeError(f"redis-server on port {port} did not answer PING:\n{log_path.read_text(errors='replace')}")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a private `redis-server` (started once per session)."""
    server = shutil.which("redis-server")
    if server is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is required in CI (apt-get install -y redis-server)")
        pytest.skip("redis-server not installed")
    workdir = tmp_path_factory.mktemp("redis")
    errors: list[str] = []
    for _ in range(3):
        try:
            proc, url = _start(server, workdir)
        except RuntimeError as exc:
            errors.append(str(exc))
            continue
        try:
            yield url
        finally:
            _stop(proc)
        return
    pytest.fail("could not start redis-server:\n" + "\n".join(errors))


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Redis]:
    """A client of the session's server, on a flushed database; closed after the test."""
    client = Redis.from_url(redis_url)
    await client.flushdb()
    try:
        yield client
    finally:
        await client.flushdb()
        await client.aclose()


@pytest.fixture
async def pooled_client(redis_url: str) -> AsyncIterator[Redis]:
    """A client of the session's server on a `BufferCheckedPool` (as the ingress and worker have); closed after."""
    client = Redis.from_pool(BufferCheckedPool.from_url(redis_url))
    try:
        yield client
    finally:
        await client.aclose()
