"""The Vertex AI family (`vertex`): Gemini models and Anthropic's Claude models of one project.

Owns: the choice, by the offer's model, between Vertex AI's two publishers —

- Gemini models (`publishers/google`): the Gemini family's translation and reading
  (`turnout.adapters.gemini`) at
  `POST {base_url}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent`
  (`:streamGenerateContent?alt=sse`);
- Claude models (a model named `claude-...`, `publishers/anthropic`): the Anthropic family's
  translation (`anthropic_wire.to_anthropic_request`) without `model` (the URL names it) and
  with `anthropic_version: "vertex-2023-10-16"` in the body, at `...:rawPredict`
  (`:streamRawPredict` for a stream, Anthropic's own events), read as Anthropic's answers —

and the credential: an OAuth2 access token (`Authorization: Bearer`), which
`turnout.adapters.google_tokens.authorized` put in `CallSpec.api_key` from the provider's
service-account file before the request is built. A complete answer is read by its shape (an
Anthropic `message` or error, else Gemini's), a stream by the method it was asked of.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Sources: https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference
(Gemini on Vertex AI), https://docs.anthropic.com/en/api/claude-on-vertex-ai and
https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/use-claude (`rawPredict`,
`streamRawPredict`, `anthropic_version: vertex-2023-10-16`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Final
from urllib.parse import quote

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.adapters.anthropic_chat import ANTHROPIC_MESSAGES, outcome_of_message
from turnout.adapters.anthropic_chat import translated_events as anthropic_events
from turnout.adapters.anthropic_events import ChunkTranslator
from turnout.adapters.anthropic_wire import count_tokens_body, to_anthropic_request
from turnout.adapters.base import AttemptResult, CallSpec, CountCall, NativeFrames, Refusal
from turnout.adapters.chat_parts import WireError
from turnout.adapters.gemini import GeminiChat, json_request, model_path, outcome_of_answer
from turnout.adapters.gemini_wire import to_gemini_request
from turnout.adapters.google_errors import google_error_outcome
from turnout.adapters.sse import event_batches
from turnout.adapters.translated import untranslatable
from turnout.core.native import Native

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
VERTEX_ANTHROPIC_VERSION: Final = "vertex-2023-10-16"
"""The `anthropic_version` a Claude request on Vertex AI carries in its body."""
CLAUDE_PREFIX: Final = "claude"
"""An offer's model starting with this is Anthropic's (`publishers/anthropic`)."""
STREAM_RAW_PREDICT: Final = ":streamRawPredict"


def is_claude(model: str) -> bool:
    """True when `model` is one of Anthropic's models on Vertex AI (`claude-sonnet-4@20250514`)."""
    return model.startswith(CLAUDE_PREFIX)


def publisher_prefix(spec: CallSpec, publisher: str) -> str:
    """`/v1/projects/{project}/locations/{location}/publishers/{publisher}` of `spec`'s provider."""
    project, location = quote(spec.project or "", safe=""), quote(spec.location or "", safe="")
    return f"/v1/projects/{project}/locations/{location}/publishers/{publisher}"


def raw_predict_request(client: httpx.AsyncClient, spec: CallSpec, *, stream: bool) -> httpx.Request:
    """The `rawPredict` / `streamRawPredict` request of a Claude target (module doc).

    Raises:
        WireError: the body cannot be expressed in Anthropic's API.
    """
    translated = to_anthropic_request(_decode.decode(spec.body), spec.target.model)
    translated.pop("model", None)
    translated["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
    method = "streamRawPredict" if stream else "rawPredict"
    path = f"{publisher_prefix(spec, 'anthropic')}/models/{quote(spec.target.model, safe='')}:{method}"
    return json_request(client, spec, path, ("authorization", f"Bearer {spec.api_key}"), translated, stream=stream)


GEMINI_COUNTED: Final = ("contents", "systemInstruction", "tools")
"""The translated request's fields Vertex AI's `countTokens` reads (it has no `generateContentRequest`)."""


def count_tokens_call(
    spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
) -> tuple[str, dict[str, Any], str]:
    """(path under `spec.base_url`, body, the answer's count field) of Vertex AI's token count of
    a Messages request for `spec`'s target (pure):

    - a Claude model: `.../publishers/anthropic/models/count-tokens:rawPredict` with Anthropic's
      count_tokens body (`anthropic_wire.count_tokens_body`, the target's model in it) and
      `anthropic_version: vertex-2023-10-16`, answered `{"input_tokens": N}`;
    - a Gemini model: `.../publishers/google/models/{model}:countTokens` with the `GEMINI_COUNTED`
      fields of `request` (the OpenAI chat form of `messages`) translated, answered `{"totalTokens": N}`.

    Sources: https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/count-tokens,
    https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/count-tokens.

    Raises:
        WireError: a Gemini model and a `request` Gemini cannot express (or none).
    """
    model = spec.target.model
    if is_claude(model):
        body = {**count_tokens_body(messages, model), "anthropic_version": VERTEX_ANTHROPIC_VERSION}
        return f"{publisher_prefix(spec, 'anthropic')}/models/count-tokens:rawPredict", body, "input_tokens"
    if request is None:
        raise WireError("the request has no chat form to count", "messages")
    translated = to_gemini_request(request)
    body = {k: translated[k] for k in GEMINI_COUNTED if k in translated}
    return f"{publisher_prefix(spec, 'google')}/models/{quote(model, safe='')}:countTokens", body, "totalTokens"


def _is_anthropic(data: Any) -> bool:
    return isinstance(data, dict) and data.get("type") in ("message", "error")


class VertexAI(GeminiChat):
    """The `ApiFamily` of `vertex` providers: Gemini's at Vertex AI's URL, Claude by `rawPredict`."""

    stream_end = "its finish (finishReason or message_stop)"

    def endpoint(self, spec: CallSpec, *, stream: bool) -> tuple[str, tuple[str, str]]:
        """`.../publishers/google/models/{model}:...` with the access token as a Bearer token."""
        path = model_path(publisher_prefix(spec, "google"), spec.target.model, stream=stream)
        return path, ("authorization", f"Bearer {spec.api_key}")

    def refusal(self, request: dict[str, Any], model: str, native: Native | None = None) -> Refusal | None:
        """Anthropic's refusals (`to_anthropic_request`) for a Claude model, Gemini's for the
        others; see `ApiFamily`."""
        if is_claude(model):
            return ANTHROPIC_MESSAGES.refusal(request, model, native)
        return super().refusal(request, model, native)

    def build_request(
        self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """`raw_predict_request` for a Claude target, else Gemini's request at `endpoint`; a body
        the publisher's API cannot express is a 400 without a call. See `ApiFamily`."""
        if not is_claude(spec.target.model):
            return super().build_request(client, spec, stream=stream)
        try:
            return raw_predict_request(client, spec, stream=stream)
        except WireError as exc:
            return untranslatable(exc)

    def count_request(
        self, client: httpx.AsyncClient, spec: CallSpec, messages: dict[str, Any], request: dict[str, Any] | None
    ) -> CountCall:
        """Vertex AI's count (`count_tokens_call`: Claude's `count-tokens:rawPredict` or Gemini's
        `:countTokens`), the access token as a Bearer token; see `TokenCounting`."""
        path, payload, field = count_tokens_call(spec, messages, request)
        bearer = ("authorization", f"Bearer {spec.api_key}")
        return json_request(client, spec, path, bearer, payload, stream=False), field

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """An Anthropic `message` or error body: `outcome_of_message`; other 2xx bodies:
        `outcome_of_answer`; other statuses: `google_error_outcome` (which reads a body that
        is not Google's as any family's)."""
        if not 200 <= status < 300:
            return google_error_outcome(status, headers, content, now_epoch_s)
        try:
            data = _decode.decode(content) if content else None
        except msgspec.DecodeError:
            data = None
        if _is_anthropic(data):
            return outcome_of_message(status, headers, content, now_epoch_s)
        return outcome_of_answer(status, headers, content, now_epoch_s)

    def stream_events(
        self, response: httpx.Response, native: NativeFrames | None = None
    ) -> AsyncIterator[list[ServerSentEvent]]:
        """Anthropic's events translated (`streamRawPredict`), else Gemini's; one list per read."""
        if response.request.url.path.endswith(STREAM_RAW_PREDICT):
            return anthropic_events(event_batches(response), ChunkTranslator(created_s=int(time.time())))
        return super().stream_events(response, native)


VERTEX_AI: Final = VertexAI()
"""The family of `vertex` providers."""
