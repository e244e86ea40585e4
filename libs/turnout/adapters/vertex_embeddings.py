"""Embeddings on `vertex` providers: OpenAI's embeddings request as Vertex AI's `:predict`.

Owns: the request for one target — `POST {base_url}/v1/projects/{project}/locations/{location}/
publishers/google/models/{model}:predict` with the access token as a Bearer token
(`turnout.adapters.google_tokens.authorized` put it in `CallSpec.api_key`), one instance per input
text (`{"instances": [{"content": text}], "parameters": {"outputDimensionality": dimensions}}`) —
and the reading of its answer (`{"predictions": [{"embeddings": {"values": [...], "statistics":
{"token_count": N}}}]}`) as OpenAI's `list` of `embedding` objects, usage the sum of the
predictions' `token_count`. Texts only, as on `gemini` providers (`gemini_embeddings.texts_of`:
token arrays are refused, `input` named); errors are Google's (`turnout.adapters.google_errors`).
How many instances one call may carry is the model's (`text-embedding-005`: 250;
`gemini-embedding-001`: 1): Vertex AI answers 400 `INVALID_ARGUMENT` above it, relayed as the
client's error.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Source: https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/text-embeddings-api.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

import httpx
import msgspec

from turnout.adapters.base import AttemptResult, CallSpec, Usage
from turnout.adapters.chat_parts import WireError
from turnout.adapters.gemini import json_request, read_google_body
from turnout.adapters.gemini_embeddings import GeminiEmbeddings, embeddings_list, texts_of
from turnout.adapters.translated import untranslatable
from turnout.adapters.vertex import publisher_prefix
from turnout.core.types import Outcome

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()


def to_predict_request(request: dict[str, Any]) -> dict[str, Any]:
    """The `:predict` body of an OpenAI embeddings `request` (pure).

    Raises:
        WireError: see `gemini_embeddings.texts_of`.
    """
    body: dict[str, Any] = {"instances": [{"content": text} for text in texts_of(request)]}
    if isinstance(request.get("dimensions"), int):
        body["parameters"] = {"outputDimensionality": request["dimensions"]}
    return body


def _vectors(data: Any) -> list[dict[str, Any]] | None:
    """The predictions' `embeddings` objects of a `:predict` answer, or None when it is not one."""
    found = data.get("predictions") if isinstance(data, dict) else None
    if not isinstance(found, list):
        return None
    vectors = [p.get("embeddings") if isinstance(p, dict) else None for p in found]
    if not all(isinstance(v, dict) and isinstance(v.get("values"), list) for v in vectors):
        return None
    return [v for v in vectors if isinstance(v, dict)]


def _tokens(vector: dict[str, Any]) -> int:
    statistics = vector.get("statistics")
    count = statistics.get("token_count") if isinstance(statistics, dict) else None
    return int(count) if isinstance(count, (int, float)) and not isinstance(count, bool) else 0


def outcome_of_predictions(status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float) -> AttemptResult:
    """An OpenAI embeddings list for a `:predict` answer (pure); errors as Google's; a 2xx
    without `predictions[].embeddings.values` is malformed (PROTOCOL)."""
    failure, data = read_google_body(
        status,
        headers,
        content,
        now_epoch_s,
        what="text-embedding predictions",
        shape=lambda d: _vectors(d) is not None,
    )
    if failure is not None:
        return failure
    vectors = _vectors(data) or []
    tokens = sum(_tokens(v) for v in vectors)
    body = embeddings_list([v["values"] for v in vectors], tokens)
    return AttemptResult(outcome=Outcome(status=status), body=_encode.encode(body), usage=Usage(input_tokens=tokens))


class VertexEmbeddings(GeminiEmbeddings):
    """The `ApiFamily` of embeddings on `vertex` providers (never streamed; refusals as Gemini's)."""

    def build_request(
        self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """`POST .../publishers/google/models/{model}:predict` (module doc); see `ApiFamily`."""
        try:
            body = to_predict_request(_decode.decode(spec.body))
        except WireError as exc:
            return untranslatable(exc)
        path = f"{publisher_prefix(spec, 'google')}/models/{quote(spec.target.model, safe='')}:predict"
        return json_request(client, spec, path, ("authorization", f"Bearer {spec.api_key}"), body, stream=False)

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `outcome_of_predictions`."""
        return outcome_of_predictions(status, headers, content, now_epoch_s)


VERTEX_EMBEDDINGS: Final = VertexEmbeddings()
"""Embeddings on `vertex` providers."""
