"""The surface seam: what a client API (chat completions, messages, ...) gives the front door.

Owns: `Surface`, the protocol each client surface implements, and `Inbound`, the one
canonical request a surface parses its body into. The front door
(`turnout_ingress.serving.front_door`) runs the admission pipeline once for every surface:
authentication, body size, budgets, the pre-flight plan, Idempotency-Key, limits, then
the queue (non-streaming) or the direct path (streaming). A surface only reads its own
request shape and writes its own answer shape; it performs no I/O and admits nothing.

The fleet's answers are OpenAI JSON (the operation's body, e.g. a `chat.completion`, or
an OpenAI error body) and OpenAI SSE frames; a surface of another shape translates them
in `render` and `render_stream`, one of OpenAI's shape passes them (`FleetShaped`).

Two hooks let a surface that keeps state of its own (the Responses surface's conversation
store) do its I/O inside the one pipeline, only when its `stateful` is true (the door reads
that flag and calls nothing for the other surfaces, `Stateless`): `prepare`, awaited after
authentication and budgets and before the pre-flight plan (it may rewrite the canonical
request, e.g. put a stored conversation in front of it), and `settle`, awaited after a
non-streamed answer is rendered (e.g. to store it). A stream settles in its own
`render_stream`, before its last frame. What a surface carries from `parse` to these
hooks and to `render` rides in `Inbound.context`.
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from starlette.responses import Response

from turnout.core.model_types import Operation
from turnout.core.native import CHAT, Native
from turnout.core.preferences import Preferences
from turnout.tenancy.identity import Identity
from turnout_ingress.errors import JSON

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState


class Inbound(NamedTuple):
    """A client request as the fleet serves it.

    Attributes:
        body: the canonical request, OpenAI Chat Completions form (decoded), which the
            pre-flight plan, the limits and the direct path read; never holds `provider`.
        preferences: the request's `provider` object (SPEC §10), checked.
        job_body: the body a queued job carries (bytes, the operation's OpenAI JSON): the
            client's bytes as received where they already are that form, else `body` encoded.
        operation: the upstream call it asks for (`turnout.core.model_types.Operation`):
            `chat` (chat completions, messages), `embeddings` or `completions`; only models
            whose type serves it are planned (`preflight.check_plan`).
        native: the client's own request when it came on a surface of another shape than
            the fleet's (`turnout.core.native.Native`: `/v1/messages`), sent as is to a
            target whose family speaks that surface ("same family, same bytes"); None:
            `body` is the client's request.
        answer_headers: (name, value) headers the front door adds to the answer, a stream's
            included (`x-turnout-tools-left-out` on the Responses surface).
        context: what a surface carries from `parse` to its hooks and renderers (the
            Responses surface's turn); None for the surfaces that need none.
    """

    body: dict[str, Any]
    preferences: Preferences
    job_body: bytes
    operation: Operation = "chat"
    native: Native | None = None
    context: Any = None
    answer_headers: tuple[tuple[str, str], ...] = ()

    @property
    def model(self) -> str:
        """The model the client asked for."""
        return str(self.body["model"])

    @property
    def stream(self) -> bool:
        """Whether the client asked for a stream (`stream: true`)."""
        return bool(self.body.get("stream"))


class Surface(Protocol):
    """One client API served by the front door (module doc).

    Attributes:
        name: the surface's name in README and records (`chat`, `messages`).
        path: the route of its `POST` (`/v1/chat/completions`).
    """

    name: str
    path: str
    stateful: bool
    """Whether the front door awaits `prepare` and `settle` for this surface (False: it calls neither)."""
    client_fields: Mapping[str, str]
    """Canonical (chat) field -> the field the client sent it as, where they differ
    (`max_completion_tokens` -> `max_output_tokens`): a refusal of the limits names the client's."""

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> Inbound:
        """The canonical request for a body as received, with the request's `headers`
        (lower-case names; a surface that carries provider headers reads them).

        Raises:
            turnout.errors.RequestRejected: 400 naming the field at fault.
        """
        ...

    async def prepare(self, state: IngressState, inbound: Inbound, identity: Identity, request_id: str) -> Inbound:
        """The request as planned, after the surface's own I/O (called only when `stateful`),
        before the pre-flight plan, the limits and the queue.

        Raises:
            turnout.errors.RequestRejected: e.g. 404 for a stored object the caller may not read.
            turnout.errors.GatewayUnavailable: 503 when the surface's store is unreachable.
        """
        ...

    async def settle(self, state: IngressState, inbound: Inbound) -> None:
        """After a non-streamed answer was rendered (called only when `stateful`); never raises:
        the client's answer is already made."""
        ...

    def render(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str],
        request_id: str,
        inbound: Inbound | None,
        shape: str = CHAT,
    ) -> Response:
        """The client's answer for the fleet's answer: `status`, `body` and its `headers`
        (`x-turnout-*`, `retry-after`, ...), in this surface's shape; `inbound` is the request
        as parsed (None only where the answer comes before a body is parsed). `shape` is the
        body's: `chat` (the fleet's OpenAI JSON: the operation's body on 200, an OpenAI error
        body otherwise), or the surface's own when a target of its family served it natively."""
        ...

    def render_stream(self, frames: AsyncIterable[Any], inbound: Inbound) -> AsyncIterable[Any]:
        """The client's stream for the direct path's OpenAI SSE `frames` (bytes as written), in
        this surface's shape; the request's `inbound` names the model the client asked for."""
        ...

    def render_native(self, frames: AsyncIterable[Any], inbound: Inbound) -> AsyncIterable[Any]:
        """The client's stream for a native stream's `frames` (a target of the surface's own family
        served it: the provider's events as sent, already in this surface's shape)."""
        ...


class Stateless:
    """The hooks of a surface with no state of its own: `stateful` is False, so the front door
    never calls `prepare` or `settle` (they are here for the protocol's sake)."""

    stateful = False
    client_fields: Mapping[str, str] = MappingProxyType({})

    async def prepare(self, state: IngressState, inbound: Inbound, identity: Identity, request_id: str) -> Inbound:
        """The request unchanged; see `Surface.prepare`."""
        return inbound

    async def settle(self, state: IngressState, inbound: Inbound) -> None:
        """Nothing; see `Surface.settle`."""

    def render_native(self, frames: AsyncIterable[Any], inbound: Inbound) -> AsyncIterable[Any]:
        """The provider's events as they are; see `Surface.render_native`."""
        return frames


class FleetShaped(Stateless):
    """The `render` and `render_stream` of a surface whose shape is the fleet's own (OpenAI's):
    the worker's answer and the direct path's frames go to the client as they are."""

    def render(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str],
        request_id: str,
        inbound: Inbound | None,
        shape: str = CHAT,
    ) -> Response:
        """The fleet's answer as it is (always `chat`-shaped here); see `Surface.render`."""
        return Response(body, status_code=status, headers=dict(headers), media_type=JSON)

    def render_stream(self, frames: AsyncIterable[Any], inbound: Inbound) -> AsyncIterable[Any]:
        """The frames as they are; see `Surface.render_stream`."""
        return frames
