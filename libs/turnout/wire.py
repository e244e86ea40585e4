"""Messages that cross processes: the job payload and the job result.

Owns: the msgspec schemas (msgpack on the wire) of what the ingress enqueues
and what a worker answers. Decoders and encoders are built once.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import msgspec

from turnout.core.health_reads import Loaded
from turnout.core.model_types import Operation
from turnout.core.native import CHAT, Native
from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy
from turnout.core.preferences import Preferences


class JobPayload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One non-streaming request, as a worker needs it.

    Fields left at their defaults are not encoded (`omit_defaults`), so a job that uses
    none of a newer field (a chat job: no `native`, `operation` `chat`) decodes in a worker
    of the version before it, which refuses unknown fields: a rolling upgrade that starts
    the new ingresses first keeps serving chat jobs.

    Attributes:
        request_id: the job id and `x-request-id`.
        body: the client's JSON body, as received (bytes).
        org / squad / key: the caller's scope ids.
        policy: the effective, clamped policy.
        settings: the resolved reroutes and fallback maps.
        preferences: the request's validated `provider` object (SPEC §10),
            taken out of `body` by the worker before any upstream call.
        deadline_epoch_s: absolute client deadline (epoch seconds on the
            ingress's clock: only the ingress measures against it).
        budget_ms: the client's time left when the job was queued (ms),
            counted from the job's queue score (Redis `TIME` at enqueue,
            ms), so a worker measures it on Redis's clock, never its own;
            stamped by `JobQueue`; 0: not stamped (the worker falls back
            to `deadline_epoch_s` on its own clock).
        reply_to: pub/sub channel of the waiting ingress process.
        trace: W3C trace context carrier (`traceparent`, `tracestate`).
        health: the health read the ingress planned with (`HealthView.loaded`);
            the worker plans with it instead of reading again while it is
            fresh (`Breakers.reads.shipped_view`); None: the worker reads.
        catalog_version: the catalog version the ingress accepted the job
            on (`turnout.catalog.live`); a worker on an older one catches up
            before planning, so a model the ingress knows is never 404 there.
            0: not stamped.
        operation: the upstream call asked for (`turnout.core.model_types.Operation`);
            `body` is that operation's OpenAI request.
        native: the client's own request when it came on another surface than
            chat (`turnout.core.native.Native`: `/v1/messages`); `body` is then
            its OpenAI translation. None: `body` is the client's chat request.
        keyed: the request carries an `Idempotency-Key`: the job runs to its end even when its
            ingress is gone (`turnout.core.liveness.may_run`), so a retry gets its answer.
            Encoded only when true: a worker of the version before it refuses a keyed job.
        holds: the budget reservations the request holds, (reservation set, member) each
            (`turnout.state.limit_store.Lease.holds`): the worker settles them with the job's
            cost in one ledger write (`turnout.state.spend_store.SpendLedger.settle`). Encoded
            only when the key has a hard budget: a worker of the version before it refuses it.
        lease_sets: the concurrency lease sets the request holds (`Lease.sets`, the job id its
            member): the worker frees them in its answer's delivery (`PickupStore.deliver`).
        tpm: (`tpm` bucket, its limit) of each scope of the key with a `tpm` limit, and
        estimate: the tokens admission charged them: the worker charges the difference from
            its answer's usage in its ledger write (`SpendLedger.charge`).
            `lease_sets`, `tpm` and `estimate` are set only when the request was admitted in its
            enqueue's own script (issue #43), encoded only then: a worker of the version before
            them refuses the job instead of leaving its slots held and its usage uncharged.
    """

    request_id: str
    body: bytes
    org: str
    squad: str | None
    key: str
    policy: Policy
    settings: RoutingSettings
    deadline_epoch_s: float
    reply_to: str
    trace: dict[str, str] = {}
    preferences: Preferences = Preferences()
    budget_ms: int = 0
    health: Loaded | None = None
    catalog_version: int = 0
    operation: Operation = "chat"
    native: Native | None = None
    keyed: bool = False
    holds: tuple[tuple[str, str], ...] = ()
    lease_sets: tuple[str, ...] = ()
    tpm: tuple[tuple[str, int], ...] = ()
    estimate: int = 0


class JobResult(msgspec.Struct, frozen=True, kw_only=True):
    """A worker's answer, replayed verbatim by the ingress.

    Attributes:
        request_id: the job id.
        status_code: HTTP status for the client.
        headers: response headers (`x-turnout-*`, `retry-after`, ...).
        body: response body bytes (JSON).
        shape: the surface `body` is in on a success (`RouteResult.shape`):
            `chat`, or a native answer's (`messages`), passed to its client as is.
    """

    request_id: str
    status_code: int
    headers: dict[str, str]
    body: bytes
    shape: str = CHAT


payload_encoder = msgspec.msgpack.Encoder()
payload_decoder = msgspec.msgpack.Decoder(JobPayload)
result_encoder = msgspec.msgpack.Encoder()
result_decoder = msgspec.msgpack.Decoder(JobResult)
