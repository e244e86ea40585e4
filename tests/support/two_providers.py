"""Router tests over two OpenAI-compatible providers answered in-process (`httpx.MockTransport`).

Owns: `TWO_PROVIDERS`, the `providers:` block of such a config (`pa` at
`pa.test`, `pb` at `pb.test`), `CHAIN`, a `models:` block whose model
`chain` tries `pa`'s `m-a` then `pb`'s `m-b`, `completion`, a provider's
200 answer, and `a_down_b_up`, upstreams where `pa` is overloaded.
"""

from __future__ import annotations

from typing import Any

import httpx

TWO_PROVIDERS = """\
providers:
  pa: {kind: openai_compatible, base_url: "http://pa.test/v1", api_key: key-a}
  pb: {kind: openai_compatible, base_url: "http://pb.test/v1", api_key: key-b}
"""

CHAIN = """\
models:
  chain:
    order: priority
    offers:
      - {provider: pa, model: m-a}
      - {provider: pb, model: m-b}
"""


def completion(model: str, usage: dict[str, int] | None = None) -> httpx.Response:
    """A 200 OpenAI `chat.completion` answering "hi" as `model`, with `usage` when given."""
    body: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = usage
    return httpx.Response(200, json=body)


def a_down_b_up(events: list[str]) -> httpx.MockTransport:
    """Upstreams where `pa` answers 503 `overloaded` and `pb` a completion as `m-b`; each call is
    appended to `events` as `upstream <host>`."""

    def answer(request: httpx.Request) -> httpx.Response:
        events.append(f"upstream {request.url.host}")
        if request.url.host == "pa.test":
            return httpx.Response(503, json={"error": {"message": "overloaded", "type": "server_error"}})
        return completion("m-b")

    return httpx.MockTransport(answer)
