"""What the families that translate OpenAI chat into another provider's API share.

Owns: `TranslatingChat`, the scaffolding of a family whose every call is an OpenAI chat request
translated into its provider's own request (Gemini's `generateContent`, Bedrock's Converse; Vertex
AI by Gemini's): what it refuses is what its translation refuses (after `crossing_refusal`), a
request it cannot express is a 400 without a call (`untranslatable`), no client speaks its surface
(OpenAI's end and error frames); the family says only how to translate (`translate`) and how to
send the translation (`send_translated`). And the pieces those families' answers share: a
blocked answer as a content-policy failure (`content_policy_failure`), and the OpenAI-shaped
`error` event that ends a translated stream (`error_event`).
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.
"""

from __future__ import annotations

from typing import Any, Final

import httpx
import msgspec
from httpx_sse import ServerSentEvent

from turnout.adapters.base import AttemptResult, CallSpec, NativeFrames, Refusal, Usage, crossing_refusal
from turnout.adapters.chat_parts import WireError
from turnout.adapters.openai_chat import DONE_FRAME, error_frame
from turnout.core.native import Native
from turnout.core.types import Outcome

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
FILTERED: Final = "content_filter"
"""The error code of a blocked answer (read as CONTENT_POLICY by `turnout.core.classify`)."""


def untranslatable(exc: WireError) -> AttemptResult:
    """The outcome of a request the provider's API cannot express: a 400 `invalid_request_error`
    without a call, its message naming the field (`{message} (param: {param})`)."""
    return AttemptResult(
        outcome=Outcome(status=400, error_type="invalid_request_error", message=f"{exc.message} (param: {exc.param})")
    )


def content_policy_failure(status: int | None, message: str, usage: Usage | None = None) -> AttemptResult:
    """A blocked answer (a safety block, a guardrail, a content filter): a 2xx error envelope of
    code `content_filter` (CONTENT_POLICY: not retried, `content_policy_fallbacks` tried when
    configured), keeping the `usage` the provider counted."""
    outcome = Outcome(
        status=status, error_type="invalid_request_error", error_code=FILTERED, message=message, error_in_body=True
    )
    return AttemptResult(outcome=outcome, usage=usage or Usage())


def error_event(error_type: str | None, message: str, code: str | None = None) -> ServerSentEvent:
    """The `error` event that ends a translated stream: `{"error": {"type", "code"?, "message"}}`
    (`code` only when given), which the relay classifies as an upstream error."""
    error: dict[str, Any] = {"type": error_type, "message": message}
    if code is not None:
        error = {"type": error_type, "code": code, "message": message}
    return ServerSentEvent(event="error", data=_encode.encode({"error": error}).decode())


class TranslatingChat:
    """The scaffolding of a translating family (module doc); subclasses set `native_surface` and
    define `translate` and `send_translated`."""

    native_surface: str

    def translate(self, request: dict[str, Any]) -> dict[str, Any]:
        """The provider's request body for an OpenAI chat `request` (pure).

        Raises:
            WireError: a field the provider's API cannot express (`param` names it).
        """
        raise NotImplementedError

    def send_translated(
        self, client: httpx.AsyncClient, spec: CallSpec, translated: dict[str, Any], *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """The request carrying `translated` for `spec` (or a failure without a call)."""
        raise NotImplementedError

    def refusal(self, request: dict[str, Any], model: str, native: Native | None = None) -> Refusal | None:
        """A request from another surface with no translation (`crossing_refusal`), else what
        `translate` refuses of `request`, else None; see `ApiFamily`."""
        crossing = crossing_refusal(native, self.native_surface)
        if crossing is not None:
            return crossing
        try:
            self.translate(request)
        except WireError as exc:
            return Refusal(exc.message, exc.param)
        return None

    def native_frames(self) -> NativeFrames:
        """Never used (no client speaks the provider's surface to Turnout): OpenAI's frames."""
        return NativeFrames(end_frame=DONE_FRAME, error_frame=error_frame)

    def build_request(
        self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool
    ) -> httpx.Request | AttemptResult:
        """`send_translated` of `spec.body` translated, or a 400 without a call for a body the
        provider's API cannot express (`untranslatable`; a body that is not JSON too); see `ApiFamily`."""
        try:
            translated = self.translate(_decode.decode(spec.body))
        except WireError as exc:
            return untranslatable(exc)
        except msgspec.DecodeError:
            return untranslatable(WireError("the body is not JSON", "body"))
        return self.send_translated(client, spec, translated, stream=stream)
