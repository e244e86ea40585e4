"""`POST /v1/messages/count_tokens` through the front door (issue #40 item 3), against a real fleet.

Its own fleet (Redis, simulator, one worker, one ingress) and a counting upstream of
Anthropic's shape served in this process, which records the `x-api-key` of every count it
is asked for; the official `anthropic` SDK with retries off. Before #40 the route called
upstream with the platform key whatever the caller's `key_mode`, outside every limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
import uvicorn
from cryptography.fernet import Fernet

from support.gateway import Gateway, running_gateway
from support.procs import free_port

pytestmark = pytest.mark.integration

PLATFORM = "platform-anthropic-key-000001"
OWN = "own-anthropic-key-of-acme-0001"
KEYS = {
    "rpm": "tk-test-count-rpm-0000001",
    "own": "tk-test-count-own-only-01",
    "shared": "tk-test-count-shared-only",
}

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  counter: {{kind: anthropic, base_url: "{counter}", api_key: {platform}}}
models:
  ok: {{offers: [{{provider: sim-a, model: ok}}]}}
  counted: {{offers: [{{provider: counter, model: claude-counted}}]}}
orgs:
  acme:
    provider_keys: {{counter: ${{ACME_OWN}}}}
    keys:
      - {{name: own, key: {own}, settings: {{key_mode: own_only}}}}
      - {{name: shared, key: {shared}, settings: {{key_mode: shared_only}}}}
  beta:
    keys:
      - {{name: rpm, key: {rpm}, settings: {{limits: {{rpm: 1}}}}}}
"""

HELLO: Any = [{"role": "user", "content": "one two three"}]


class Counter:
    """Anthropic's count_tokens, answering `{"input_tokens": 7}` and keeping each caller's `x-api-key`."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._lock = threading.Lock()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(self._app, host="127.0.0.1", port=port, log_level="warning", interface="asgi3")
        self._server = uvicorn.Server(config)
        threading.Thread(target=self._server.run, daemon=True).start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the counting upstream did not start"
            time.sleep(0.02)

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        with self._lock:
            self.keys.append(headers.get("x-api-key", ""))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"input_tokens": 7}'})

    def close(self) -> None:
        self._server.should_exit = True


@pytest.fixture(scope="module")
def counter() -> Iterator[Counter]:
    upstream = Counter()
    yield upstream
    upstream.close()


@pytest.fixture(scope="module")
def count_gw(counter: Counter) -> Iterator[Gateway]:
    env = {"TURNOUT_SECRET_KEY": Fernet.generate_key().decode(), "ACME_OWN": OWN}
    fields: dict[str, Any] = {"counter": counter.url, "platform": PLATFORM, **KEYS}
    with running_gateway(CONFIG, env=env, **fields) as gateway:
        yield gateway


def _client(gw: Gateway, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.base_url, api_key=KEYS[key], max_retries=0)


def test_count_tokens_over_the_keys_rpm_is_429_on_a_counter_of_its_own(count_gw: Gateway, counter: Counter) -> None:
    client = _client(count_gw, "rpm")
    try:
        before = len(counter.keys)
        assert client.messages.count_tokens(model="counted", messages=HELLO).input_tokens == 7
        refused = []
        for _ in range(9):
            with pytest.raises(anthropic.RateLimitError) as info:
                client.messages.count_tokens(model="counted", messages=HELLO)
            refused.append(info.value)
        assert all(e.body["error"]["type"] == "rate_limit_error" for e in refused)  # type: ignore[index]
        assert int(refused[0].response.headers["retry-after"]) >= 1
        assert len(counter.keys) - before == 1  # a refused count never went upstream
        print(f"\ncount_tokens under rpm 1: 1/10 counted, 9 × 429, {len(counter.keys) - before} upstream call")
        # counting spent the count counter only: the key's model call is still admitted
        assert client.messages.create(model="ok", max_tokens=5, messages=HELLO).content
    finally:
        client.close()


def test_count_tokens_honours_key_mode_an_own_only_key_never_reaches_the_platform_key(
    count_gw: Gateway, counter: Counter
) -> None:
    own, shared = _client(count_gw, "own"), _client(count_gw, "shared")
    try:
        start = len(counter.keys)
        for _ in range(10):
            raw = own.messages.with_raw_response.count_tokens(model="counted", messages=HELLO)
            assert raw.headers["x-turnout-count-source"] == "provider"
        assert counter.keys[start:] == [OWN] * 10
        assert PLATFORM not in counter.keys[start:]
        shared.messages.count_tokens(model="counted", messages=HELLO)
        assert counter.keys[-1] == PLATFORM  # shared_only: the platform key, as its model calls
    finally:
        own.close()
        shared.close()
