"""Embeddings on `gemini` providers: OpenAI's embeddings request as the Gemini API's batch.

Owns: the request for one target — `POST {base_url}/v1beta/models/{model}:batchEmbedContents`
with the key in `x-goog-api-key` and one `EmbedContentRequest` per input text
(`{"model": "models/{model}", "content": {"parts": [{"text"}]}, "outputDimensionality"}`) — and
the reading of its answer (`{"embeddings": [{"values": [...]}]}`) as OpenAI's `list` of
`embedding` objects, the vectors as floats (the embeddings surface encodes them in base64 when
the client asked so: `turnout_ingress.surfaces.embeddings`). Errors are Google's
(`turnout.adapters.google_errors`). Token arrays have no Gemini form: such a request is refused
(the offer skipped, `input` named). Usage: `usageMetadata.promptTokenCount` when the answer
carries one, else none.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Source: https://ai.google.dev/api/embeddings (`batchEmbedContents`, `outputDimensionality`).
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

import httpx
import msgspec

from turnout.adapters.base import AttemptResult, CallSpec, Refusal, Usage
from turnout.adapters.chat_parts import WireError
from turnout.adapters.gemini import GeminiChat, json_request, read_google_body
from turnout.adapters.translated import untranslatable
from turnout.core.native import Native
from turnout.core.types import Outcome

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
TEXT_ONLY: Final = "Gemini and Vertex AI providers embed text only: `input` must be a string or an array of strings."


def texts_of(request: dict[str, Any]) -> list[str]:
    """The input texts of an OpenAI embeddings request (`input`: a string or strings).

    Raises:
        WireError: token arrays (or anything but text), naming `input`.
    """
    given = request.get("input")
    texts = [given] if isinstance(given, str) else given
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise WireError(TEXT_ONLY, "input")
    return texts


def to_batch_request(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The `batchEmbedContents` body of an OpenAI embeddings `request` for `model` (pure).

    Raises:
        WireError: see `texts_of`.
    """
    item: dict[str, Any] = {"model": f"models/{model}"}
    if isinstance(request.get("dimensions"), int):
        item["outputDimensionality"] = request["dimensions"]
    return {"requests": [{**item, "content": {"parts": [{"text": text}]}} for text in texts_of(request)]}


def is_batch(data: Any) -> bool:
    """True for a `batchEmbedContents` answer: an `embeddings` list of objects with `values`."""
    found = data.get("embeddings") if isinstance(data, dict) else None
    return isinstance(found, list) and all(isinstance(e, dict) and isinstance(e.get("values"), list) for e in found)


def embeddings_list(vectors: list[Any], tokens: int) -> dict[str, Any]:
    """OpenAI's embeddings answer of `vectors` (in input order) and `tokens` input tokens (pure)."""
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "model": "",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def outcome_of_embeddings(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """An OpenAI embeddings list for a `batchEmbedContents` answer (pure); errors as Google's; a
    2xx without an `embeddings` list of `values` is malformed (PROTOCOL)."""
    failure, data = read_google_body(
        status, headers, content, now_epoch_s, what="a batch of embeddings", shape=is_batch
    )
    if failure is not None:
        return failure
    metadata = data.get("usageMetadata")
    tokens = int(metadata.get("promptTokenCount") or 0) if isinstance(metadata, dict) else 0
    body = embeddings_list([e["values"] for e in data["embeddings"]], tokens)
    return AttemptResult(outcome=Outcome(status=status), body=_encode.encode(body), usage=Usage(input_tokens=tokens))


class GeminiEmbeddings(GeminiChat):
    """The `ApiFamily` of embeddings on `gemini` providers (never streamed)."""

    def refusal(self, request: dict[str, Any], model: str, native: Native | None = None) -> Refusal | None:
        """Token-array inputs (`texts_of`); else None. See `ApiFamily`."""
        given = request.get("input")
        if isinstance(given, str) or (isinstance(given, list) and given and all(isinstance(t, str) for t in given)):
            return None
        return Refusal(TEXT_ONLY, "input")

    def build_request(
        self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """`POST {base_url}/v1beta/models/{model}:batchEmbedContents` (module doc); see `ApiFamily`."""
        try:
            batch = to_batch_request(_decode.decode(spec.body), spec.target.model)
        except WireError as exc:
            return untranslatable(exc)
        path = f"/v1beta/models/{quote(spec.target.model, safe='')}:batchEmbedContents"
        return json_request(client, spec, path, ("x-goog-api-key", spec.api_key), batch, stream=False)

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `outcome_of_embeddings`."""
        return outcome_of_embeddings(status, headers, content, now_epoch_s)


GEMINI_EMBEDDINGS: Final = GeminiEmbeddings()
"""Embeddings on `gemini` providers."""
