"""Provider answers in both wire formats, for adapter tests.

OpenAI: a `chat.completion` and an error envelope
(platform.openai.com/docs/api-reference/chat/object, .../errors); Anthropic: a
`message` and an error envelope (docs.anthropic.com/en/api/messages,
.../errors). `SUCCESS` and `ERROR` are keyed by family.
"""

from __future__ import annotations

from typing import Any

OPENAI_COMPLETION: dict[str, Any] = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}
ANTHROPIC_MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 2},
}
SUCCESS: dict[str, dict[str, Any]] = {"openai": OPENAI_COMPLETION, "anthropic": ANTHROPIC_MESSAGE}
ERROR: dict[str, dict[str, Any]] = {
    "openai": {"error": {"message": "slow down", "type": "rate_limit_exceeded", "code": "rate_limit_exceeded"}},
    "anthropic": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
}
