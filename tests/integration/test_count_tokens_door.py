"""`POST /v1/messages/count_tokens` through the front door (issue #40 item 3), against a real fleet.

Its own fleet (Redis, simulator, one worker, one ingress) and a counting upstream of
Anthropic's shape served in this process, which records the `x-api-key` of every count it
is asked for; the official `anthropic` SDK with retries off. Before #40 the route called
upstream with the platform key whatever the caller's `key_mode`, outside every limit.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
import redis
import uvicorn
from cryptography.fernet import Fernet

from support.gateway import Gateway, running_gateway
from support.procs import free_port
from turnout.state import keys

pytestmark = pytest.mark.integration

PLATFORM = "platform-anthropic-key-000001"
OWN = "own-anthropic-key-of-acme-0001"
KEYS = {
    "rpm": "tk-test-count-rpm-0000001",
    "own": "tk-test-count-own-only-01",
    "shared": "tk-test-count-shared-only",
    "plain": "tk-test-count-plain-00001",
}

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
  counter: {{kind: anthropic, base_url: "{counter}", api_key: {platform}}}
models:
  ok: {{offers: [{{provider: sim-a, model: ok}}]}}
  counted: {{offers: [{{provider: counter, model: claude-counted}}]}}
  flaky: {{offers: [{{provider: counter, model: claude-flaky}}]}}
breaker: {{consecutive_failures: 3, sole_consecutive_failures: 3, cooldown_s: 60, max_cooldown_s: 60}}
orgs:
  acme:
    provider_keys: {{counter: ${{ACME_OWN}}}}
    keys:
      - {{name: own, key: {own}, settings: {{key_mode: own_only}}}}
      - {{name: shared, key: {shared}, settings: {{key_mode: shared_only}}}}
      - {{name: plain, key: {plain}}}
  beta:
    keys:
      - {{name: rpm, key: {rpm}, settings: {{limits: {{rpm: 1}}}}}}
"""

HELLO: Any = [{"role": "user", "content": "one two three"}]


MESSAGE = (
    b'{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-flaky", "content": '
    b'[{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}}'
)


class Counter:
    """Anthropic's count_tokens, answering `{"input_tokens": 7}` and keeping each caller's `x-api-key`;
    for `claude-flaky`, every count is a 500 and `/v1/messages` answers (`flaky_paths` keeps its calls)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.flaky_paths: list[str] = []
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
        parts = [await receive()]
        while parts[-1].get("more_body"):
            parts.append(await receive())
        body = b"".join(part.get("body", b"") for part in parts)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        status, answer = 200, b'{"input_tokens": 7}'
        with self._lock:
            if b"claude-flaky" in body:
                self.flaky_paths.append(scope["path"])
                counting = scope["path"].endswith("count_tokens")
                status, answer = (
                    (500, b'{"type": "error", "error": {"type": "api_error"}}') if counting else (200, MESSAGE)
                )
            else:
                self.keys.append(headers.get("x-api-key", ""))
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": answer})

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


def _count_rows(gw: Gateway, request_ids: list[str]) -> list[dict[str, Any]]:
    """The attempt records of `request_ids` (waiting up to 10 s for the records' flush)."""
    with redis.Redis.from_url(gw.redis_url) as store:
        deadline, rows = time.monotonic() + 10, []
        while time.monotonic() < deadline:
            rows = [json.loads(f[b"r"]) for _, f in store.xrange(keys.RECORDS_STREAM)]
            rows = [r for r in rows if r["request_id"] in request_ids]
            if len({r["request_id"] for r in rows}) >= len(request_ids):
                break
            time.sleep(0.2)
    return rows


def test_a_failing_count_endpoint_opens_its_own_breaker_never_chats_and_each_count_is_recorded(
    count_gw: Gateway, counter: Counter
) -> None:
    client = _client(count_gw, "plain")
    try:
        ids, sources, asked = [], [], []
        for _ in range(10):
            raw = client.messages.with_raw_response.count_tokens(model="flaky", messages=HELLO)
            ids.append(raw.headers["x-request-id"])
            sources.append(raw.headers["x-turnout-count-source"])
            asked.append(counter.flaky_paths.count("/v1/messages/count_tokens"))
        assert sources == ["estimate"] * 10  # every failed count falls back to the estimate
        # the run of failures opens the count breaker (at least `consecutive_failures`, 3): later counts stay home
        assert 3 <= asked[-1] <= 6 and asked[-1] == asked[-4], asked
        answer = client.messages.create(model="flaky", max_tokens=5, messages=HELLO)
        assert answer.content and counter.flaky_paths[-1] == "/v1/messages"  # chat's breaker is closed
        rows = _count_rows(count_gw, ids[:3])
        print(f"\nfailing count endpoint: 10 counts, {asked[-1]} upstream, then chat served; count records {rows}")
        assert [(r["operation"], r["kind"], r["status"]) for r in rows] == [("count_tokens", "server_error", 500)] * 3
        assert all(r["cost_usd"] == 0 and r["provider"] == "counter" for r in rows)
    finally:
        client.close()


def test_a_provider_count_is_recorded_with_its_tokens(count_gw: Gateway) -> None:
    client = _client(count_gw, "shared")
    try:
        raw = client.messages.with_raw_response.count_tokens(model="counted", messages=HELLO)
        (row,) = _count_rows(count_gw, [raw.headers["x-request-id"]])
        assert (row["operation"], row["kind"], row["counted_tokens"], row["input_tokens"]) == (
            "count_tokens",
            "success",
            7,
            0,
        )
    finally:
        client.close()
