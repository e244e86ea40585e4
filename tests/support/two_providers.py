"""Router tests over two OpenAI-compatible providers answered in-process (`httpx.MockTransport`).

Owns: `TWO_PROVIDERS`, the `providers:` block of such a config (`pa` at
`pa.test`, `pb` at `pb.test`), and `completion`, a provider's 200 answer.
"""

from __future__ import annotations

from typing import Any

import httpx

TWO_PROVIDERS = """\
providers:
  pa: {kind: openai_compatible, base_url: "http://pa.test/v1", api_key: key-a}
  pb: {kind: openai_compatible, base_url: "http://pb.test/v1", api_key: key-b}
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
