"""The OpenAI family's other operations: embeddings and legacy completions (`openai`, `openai_compatible`).

Owns: the request for one target (`POST {base_url}/embeddings`, `POST {base_url}/completions`,
the body as the client sent it with the target's model, a Bearer key: as chat's,
`turnout.adapters.openai_chat.OpenAIChat`, at another path) and the reading of a complete answer (`outcome_of_embeddings`, `outcome_of_completion`: the body on success, an
`Outcome` for the loop otherwise, an error envelope in a 2xx included). A completions stream
passes its events as they come (`text_completion` chunks; `turnout.adapters.commit` finds
their first `text`). Sending, time limits and the commit point are `turnout.adapters.exchange`'s.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Wire format: https://platform.openai.com/docs/api-reference/embeddings/create (a `list`
of `embedding` objects and `usage.prompt_tokens`) and
https://platform.openai.com/docs/api-reference/completions/create (`choices[].text`).
"""

from __future__ import annotations

from typing import Final

import httpx

from turnout.adapters.base import AttemptResult
from turnout.adapters.openai_chat import OpenAIChat, outcome_with_list


def outcome_of_embeddings(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """An embeddings answer (pure): success is a body with a `data` list (`outcome_with_list`)."""
    return outcome_with_list(status, headers, content, now_epoch_s, field="data", what="an embedding list")


def outcome_of_completion(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """A legacy completions answer (pure): success is a body with a `choices` list (`outcome_with_list`)."""
    return outcome_with_list(status, headers, content, now_epoch_s, field="choices", what="a text completion")


class OpenAIEmbeddings(OpenAIChat):
    """`POST {base_url}/embeddings` (never streamed); the rest as chat's (`OpenAIChat`)."""

    path = "/embeddings"

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `outcome_of_embeddings` (`native` changes nothing: the body is the provider's)."""
        return outcome_of_embeddings(status, headers, content, now_epoch_s)


class OpenAICompletions(OpenAIChat):
    """`POST {base_url}/completions`, the legacy text completions; streams and the rest as chat's."""

    path = "/completions"

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `outcome_of_completion` (`native` changes nothing: the body is the provider's)."""
        return outcome_of_completion(status, headers, content, now_epoch_s)


OPENAI_EMBEDDINGS: Final = OpenAIEmbeddings()
"""Embeddings on `openai` and `openai_compatible` providers."""
OPENAI_COMPLETIONS: Final = OpenAICompletions()
"""Legacy completions on `openai` and `openai_compatible` providers."""
