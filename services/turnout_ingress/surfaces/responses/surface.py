"""`POST /v1/responses`: the OpenAI Responses surface, for Codex CLI, the OpenAI Agents SDK
and the `openai` SDK's `client.responses.*`.

Owns: reading a Responses body into the front door's `Inbound` (`request`; the
`provider` object taken out and checked as on the chat route; the client's own request
carried for `api: responses` offers, `native.carried`), the two hooks of a
stateful surface, and answering in the Responses shape:
- `prepare` (before the plan): with `previous_response_id`, the stored conversation of
  that response (`turnout.state.response_store`, scoped to the caller's org and key) is
  put in front of this turn's input — as chat messages, and as items in the native
  carry's body (`native.upstream_body`) — so any target can serve the
  follow-up; an unknown, expired or another key's id is 404 `previous_response_not_found`,
  an unreachable store 503 `redis_unavailable`; a built-in tool that may be forced on a
  model with no `api: responses` offer is 400 `unsupported_tool`;
- `render`: the fleet's `chat.completion` becomes a Response object
  (`answer`), an `api: responses` offer's Response keeps its own but for its id
  (`native.client_response`); every other answer is the fleet's OpenAI error
  body as it is, with its `x-turnout-*` headers and per-attempt summary, but for a 400's
  fields of the canonical chat request, told as the client's (`params`:
  `input[2].arguments`, not `messages[3].tool_calls[1]`);
- `render_native`: an `api: responses` offer's stream relayed as sent
  (`native.native_stream`);
- `settle` (non-streamed) and the stream's keeper (before `response.completed`): with
  `store` (default true) the Response, its input items and its conversation are kept. A
  store that fails is logged and counted (`turnout_responses_not_stored`); the client
  still gets its answer.
The direct path's chat frames become Responses events (`events`). The other
routes (`GET` / `DELETE /v1/responses/{id}`, `input_items`) are `routes`.
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.

Source: https://platform.openai.com/docs/api-reference/responses.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

import msgspec
from starlette.responses import Response

from turnout.catalog import Catalog
from turnout.core.native import CHAT
from turnout.core.native import RESPONSES as NATIVE_RESPONSES
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.state.errors import StateUnavailable
from turnout.tenancy.identity import Identity
from turnout_ingress.errors import JSON
from turnout_ingress.serving.validation import decode_request, take_preferences
from turnout_ingress.surfaces.base import Inbound
from turnout_ingress.surfaces.responses.answer import output_messages, request_id_of, to_response, with_ids
from turnout_ingress.surfaces.responses.events import EventSequencer, responses_stream
from turnout_ingress.surfaces.responses.native import (
    KEPT_STATUSES,
    carried,
    client_response,
    items_of_messages,
    native_stream,
    replayable,
    upstream_body,
)
from turnout_ingress.surfaces.responses.params import client_error
from turnout_ingress.surfaces.responses.request import ResponsesCall, translate_request

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState

log = logging.getLogger("turnout.responses")
_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
_DROPPED_HEADERS = frozenset({"content-length", "content-type"})
STORE_UNREACHABLE: Final = "The conversation store (Redis) is unreachable; retry shortly."


def previous_not_found(response_id: str) -> RequestRejected:
    """The 404 for a `previous_response_id` the caller may not continue (unknown, expired,
    deleted, evicted, or another key's or org's: never said which)."""
    return RequestRejected(
        404,
        f"Previous response with id '{response_id[:200]}' not found.",
        code="previous_response_not_found",
        param="previous_response_id",
    )


@dataclass(kw_only=True)
class ResponsesTurn:
    """One Responses request on its way through the door (`Inbound.context` after `prepare`).

    Attributes:
        call: the translated request.
        request_id: the gateway's request id (the Response id derives from it).
        created_at: epoch seconds it arrived.
        history: the stored conversation it continues (chat messages), empty without one.
        items: the same conversation as Responses items (`StoredResponse.items`, or made from
            its chat messages when it predates them: `items_of_messages`), empty without one.
        org / key: the caller's scope, which a stored Response belongs to.
        state: the ingress's objects (the store and the metrics).
        answer: the Response object once rendered (what `settle` keeps), else None.
    """

    call: ResponsesCall
    request_id: str
    created_at: int
    history: list[dict[str, Any]]
    items: list[Any]
    org: str
    key: str
    state: IngressState
    answer: dict[str, Any] | None = None


async def keep(turn: ResponsesTurn, response: dict[str, Any]) -> None:
    """Store `response` (and its conversation) when the request asked for `store`; never raises:
    a failure is logged and counted by reason (`redis_unavailable`, `too_large`)."""
    if not turn.call.store or response.get("status") not in KEPT_STATUSES:
        return
    rid = request_id_of(str(response["id"]))
    output = response.get("output") or []
    messages = turn.history + turn.call.turn + output_messages(output)
    items = turn.items + turn.call.sent_input + replayable(output)
    reason = None
    try:
        evicted = await turn.state.responses.put(
            turn.org, turn.key, response, with_ids(turn.call.input_items, rid), messages, items
        )
        if evicted is None:
            reason = "too_large"
    except StateUnavailable as exc:
        reason = "redis_unavailable"
        log.warning("request %s: response %s answered, not stored (%s)", rid, response["id"], exc.kind)
    if reason is not None:
        turn.state.metrics.responses_not_stored.labels(reason=reason).inc()
        if reason == "too_large":
            log.warning(
                "request %s: response %s answered, not stored (larger than responses_max_bytes)", rid, response["id"]
            )


class Responses:
    """The `Surface` of the OpenAI Responses API (module doc)."""

    name = "responses"
    path = "/v1/responses"
    stateful = True
    client_fields: Mapping[str, str] = MappingProxyType({"max_completion_tokens": "max_output_tokens"})

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> Inbound:
        """The chat request of this turn (without a stored conversation: `prepare` adds it); the
        job body is written by `prepare`. See `Surface.parse`."""
        data = decode_request(raw)
        preferences = take_preferences(data)
        call = translate_request(data, defer_builtin=True)
        native = carried(raw, headers.items(), call)
        left_out = (("x-turnout-tools-left-out", ",".join(call.tools_left_out)),) if call.tools_left_out else ()
        return Inbound(call.chat, preferences, b"", context=call, answer_headers=left_out, native=native)

    async def prepare(self, state: IngressState, inbound: Inbound, identity: Identity, request_id: str) -> Inbound:
        """The conversation rebuilt: instructions, the stored turns of `previous_response_id`,
        then this turn's input; the native carry's body with the same turns as items
        (`native.upstream_body`). See `Surface.prepare`.

        Raises:
            RequestRejected: 404 `previous_response_not_found`; 400 `unsupported_tool` for a
                built-in tool that may be forced when the model has no `api: responses` offer.
            GatewayUnavailable: 503 `redis_unavailable` (the store is unreachable).
        """
        call: ResponsesCall = inbound.context
        catalog = state.catalog
        if call.builtin_refusal is not None and not has_responses_offer(catalog, inbound.model):
            raise call.builtin_refusal
        history: list[dict[str, Any]] = []
        items: list[Any] = []
        if call.previous_response_id is not None:
            try:
                stored = await state.responses.get(identity.org, identity.key, call.previous_response_id)
            except StateUnavailable as exc:
                raise GatewayUnavailable(STORE_UNREACHABLE, retry_after_s=1, code="redis_unavailable") from exc
            if stored is None:
                raise previous_not_found(call.previous_response_id)
            history = stored.messages
            items = stored.items if stored.items is not None else items_of_messages(stored.messages)
        body = {**call.chat, "messages": ([call.instructions] if call.instructions else []) + history + call.turn}
        native = inbound.native if catalog.responses_offers else None  # no offer to carry it to
        if native is not None:
            rewritten = upstream_body(native.body, items if call.previous_response_id is not None else None)
            native = msgspec.structs.replace(native, body=rewritten)
        turn = ResponsesTurn(
            call=call,
            request_id=request_id,
            created_at=int(state.clock()),
            history=history,
            items=items,
            org=identity.org,
            key=identity.key,
            state=state,
        )
        return inbound._replace(body=body, job_body=_encode.encode(body), context=turn, native=native)

    async def settle(self, state: IngressState, inbound: Inbound) -> None:
        """Keep the rendered Response (`keep`). See `Surface.settle`."""
        turn = inbound.context
        if isinstance(turn, ResponsesTurn) and turn.answer is not None:
            await keep(turn, turn.answer)

    def render(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str],
        request_id: str,
        inbound: Inbound | None,
        shape: str = CHAT,
    ) -> Response:
        """A Response object for a 200 (its id from the answer's `x-request-id`, so a replay
        names the first request's Response): the fleet's `chat.completion` translated, or an
        `api: responses` offer's own Response (`shape` `responses`: `client_response`); the
        fleet's OpenAI error body otherwise (a 200 whose body cannot be read: 502). See
        `Surface.render`."""
        kept = {k: v for k, v in headers.items() if k.lower() not in _DROPPED_HEADERS}
        turn = inbound.context if inbound is not None else None
        if status == 400 and isinstance(turn, ResponsesTurn):
            body = _told_as_sent(body, turn)
        if status != 200 or not isinstance(turn, ResponsesTurn):
            return Response(body, status_code=status, headers=kept, media_type=JSON)
        try:
            completion = _decode.decode(body)
        except msgspec.DecodeError:
            completion = None
        if not isinstance(completion, dict) or (shape == NATIVE_RESPONSES and completion.get("object") != "response"):
            failed = _encode.encode(
                {
                    "error": {
                        "message": "The provider's answer could not be read.",
                        "type": "upstream_error",
                        "param": None,
                        "code": "bad_upstream_body",
                    }
                }
            )
            return Response(failed, status_code=502, headers={**kept, "x-request-id": request_id}, media_type=JSON)
        rid = kept.get("x-request-id") or request_id
        if shape == NATIVE_RESPONSES:
            turn.answer = client_response(completion, request_id=rid, echo=turn.call.echo)
            return Response(_encode.encode(turn.answer), status_code=200, headers=kept, media_type=JSON)
        turn.answer = to_response(
            completion,
            request_id=rid,
            created_at=turn.created_at,
            echo=turn.call.echo,
            model=str(turn.call.chat["model"]),
        )
        return Response(_encode.encode(turn.answer), status_code=200, headers=kept, media_type=JSON)

    def render_stream(self, frames: AsyncIterable[Any], inbound: Inbound) -> AsyncIterable[Any]:
        """Responses events (`events.responses_stream`), the Response kept before its
        last event. See `Surface.render_stream`."""
        turn: ResponsesTurn = inbound.context
        sequencer = EventSequencer(
            request_id=turn.request_id, created_at=turn.created_at, model=inbound.model, echo=turn.call.echo
        )

        async def keeper(response: dict[str, Any]) -> None:
            await keep(turn, response)

        return responses_stream(frames, sequencer, keeper if turn.call.store else None)

    def render_native(self, frames: AsyncIterable[Any], inbound: Inbound) -> AsyncIterable[Any]:
        """An `api: responses` offer's events as sent, its Response's id Turnout's, the Response
        kept before the last event (`native.native_stream`). See `Surface.render_native`."""
        turn: ResponsesTurn = inbound.context

        async def keeper(response: dict[str, Any]) -> None:
            await keep(turn, response)

        return native_stream(
            frames, request_id=turn.request_id, echo=turn.call.echo, keeper=keeper if turn.call.store else None
        )


def _told_as_sent(body: bytes, turn: ResponsesTurn) -> bytes:
    """A 400's error body with the canonical chat request's fields told as the client's
    (`params.client_error`); `body` itself when it is not such an error."""
    try:
        answer = _decode.decode(body)
    except msgspec.DecodeError:
        return body
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return body
    told = client_error(
        error,
        instructions=turn.call.instructions is not None,
        history=len(turn.history),
        sources=turn.call.sources,
    )
    return body if told is error else _encode.encode({**answer, "error": told})


def has_responses_offer(catalog: Catalog, model: str) -> bool:
    """Whether `model` (a catalog id, or a pinned `provider/model`) has an `api: responses` offer."""
    targets = catalog.models.get(model)
    keys = [t.key for t in targets] if targets is not None else [model]
    return any(key in catalog.responses_offers for key in keys)


RESPONSES: Final = Responses()
"""The Responses surface."""
