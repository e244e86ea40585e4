"""Every Redis key and channel name Turnout uses, in one place.

Owns: names only. The job queue's keys (`turnout.state.jobs`) all carry one hash tag,
`JOBS_TAG` (`{jobs}`), so every script over them touches one slot (Redis Cluster ready);
the `LEGACY_*` names are the layout of the version before (arq's `arq:*` keys and
Turnout's untagged ones), read only to adopt the jobs it left (`turnout.state.jobs.legacy`).
Must not import: anything but the standard library.
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote

JOBS_TAG = "{jobs}"
"""The job queue's hash tag: Redis Cluster hashes only the part between the braces, so
every key below that carries it lives in one slot."""

_JOBS = f"turnout:{JOBS_TAG}:"

QUEUE = _JOBS + "queue"
"""Sorted set of queued and running job ids (score = enqueue time, Redis `TIME` ms)."""

JOB_PREFIX = _JOBS + "job:"
"""String per job id: its envelope (`turnout.state.jobs.envelope`), expiring at the client's deadline."""

IN_PROGRESS_PREFIX = _JOBS + "lease:"
"""String per job id: a worker holds the job (its lease, `job_lease_s`, renewed while the worker lives)."""

RETRY_PREFIX = _JOBS + "try:"
"""Counter per job id: how many times the job was claimed (1 = first run)."""

RETRY_TTL_S = 88_400
"""Life of a try counter (seconds), renewed at each claim (arq's figure)."""

FAIR_RING = _JOBS + "fair:ring"
"""List of org ids with jobs waiting in their fair queue, each once: the pickup's round robin."""

FAIR_ORG_PREFIX = _JOBS + "fair:org:"
"""Sorted set per org: its waiting job ids (score = enqueue ms), claimed oldest first."""


def fair_org_key(org: str) -> str:
    """Key of an org's fair queue."""
    return FAIR_ORG_PREFIX + org


INGRESS_LEASES = _JOBS + "ingresses"
"""Hash: an ingress's reply channel -> until when its liveness lease runs (Redis `TIME` ms; 0: ended)
(`turnout.state.jobs.liveness`, the rule: `turnout.core.liveness`)."""

DOORBELL = _JOBS + "doorbell:rings"
"""List: one entry per job enqueued and not yet claimed; a worker with a free slot
moves one (`BLMOVE`) into its own `doorbell_taken_key` and picks in the same round
trip, so one ring wakes one worker (`turnout_worker.pickup`)."""

DOORBELL_TAKEN_PREFIX = _JOBS + "doorbell:taken:"
"""List per worker: the doorbell entries it moved out of `DOORBELL` for the pick that
follows in the same round trip, which counts and deletes them (empty between picks)."""


def doorbell_taken_key(worker_id: str) -> str:
    """Key of the doorbell entries `worker_id` took for its next pick."""
    return DOORBELL_TAKEN_PREFIX + worker_id


RESULT_PREFIX = _JOBS + "result:"
"""String key per job id: the encoded `JobResult`, kept `result_ttl_s`."""

LEGACY_QUEUE = "arq:queue"
"""The previous version's queue (arq's sorted set)."""

LEGACY_JOB_PREFIX = "arq:job:"
LEGACY_IN_PROGRESS_PREFIX = "arq:in-progress:"
LEGACY_RETRY_PREFIX = "arq:retry:"
LEGACY_RESULT_PREFIX = "turnout:result:"
"""The previous version's per-job keys: envelope, lease, try counter, stored answer."""

LEGACY_FAIR_RING = "turnout:fair:ring"
LEGACY_FAIR_ORG_PREFIX = "turnout:fair:org:"
LEGACY_DOORBELL = "turnout:doorbell:rings"
"""The previous version's fair ring, fair queues and doorbell (cleared once its queue is empty)."""

FLEET_WORKERS = "turnout:fleet:workers"
"""Hash worker id -> `<slots>:<service ms>:<expires ms, Redis time>`: the workers' heartbeats
(`turnout.state.fleet`), read by the ingress to estimate the queue's wait."""

REPLY_CHANNEL_PREFIX = "turnout:reply:"
"""Pub/sub channel per ingress process: results of the jobs it waits for."""

CANCEL_CHANNEL = "turnout:cancel"
"""Pub/sub channel: message = a job id whose client went away."""

HEALTH_CHANNEL = "turnout:health:changed"
"""Pub/sub channel: message = a breaker subject (target or credential) whose standing just changed
(a failure counted, a trip, a close, a rest) or a usage cap (`cap_subject`) just noted; processes
that keep health reads a moment (`turnout.health.reads.HealthReads`, `cache_s`) forget them."""


def result_key(job_id: str) -> str:
    """Key of a job's stored result."""
    return RESULT_PREFIX + job_id


def reply_channel(ingress_id: str) -> str:
    """Channel an ingress process listens on for its results."""
    return REPLY_CHANNEL_PREFIX + ingress_id


BREAKER_PREFIX = "turnout:breaker:"
"""Hash per target `provider/model`: {v: version, s: msgpack BreakerSnapshot}."""

PROBE_PREFIX = "turnout:probe:"
"""String per target: the HALF_OPEN probe permit (`SET NX PX`)."""


PROBER_KEY = "turnout:prober"
"""String: the token of the one worker that sends the fleet's active probes, with a TTL it renews
(`turnout.state.prober_lease`)."""

RAMP_PREFIX = "turnout:ramp:"
"""String per target in slow start: the theoretical arrival time (epoch µs) of its next call by
rate (`turnout.core.ramp.rate_slot`), with a TTL of a few seconds."""


def ramp_key(target: str) -> str:
    """Key of a target's slow-start rate counter."""
    return RAMP_PREFIX + target


SPEED_PREFIX = "turnout:speed:"
"""Hash per target: {ttft_ms, tps}, the fleet's rolling measures (`turnout.state.breaker_store`)."""


def speed_key(target: str) -> str:
    """Key of a target's rolling latency and output-rate measures."""
    return SPEED_PREFIX + target


PLAN_CAP_PREFIX = "turnout:plancap:"
"""String per (credential scope, target): epoch seconds until the account's usage cap resets, with that TTL."""


def plan_cap_key(subject: str) -> str:
    """Key of one usage cap (`turnout.state.breaker_store.cap_subject`)."""
    return PLAN_CAP_PREFIX + subject


def breaker_key(target: str) -> str:
    """Key of a target's breaker snapshot."""
    return BREAKER_PREFIX + target


def probe_key(target: str) -> str:
    """Key of a target's probe permit."""
    return PROBE_PREFIX + target


IDEMPOTENCY_PREFIX = "turnout:idem:"
"""String per (org, gateway key, Idempotency-Key) digest: `request_id:body_digest`."""


def idempotency_key(org: str, key: str, client_key: str) -> str:
    """Key binding a client's `Idempotency-Key` (any length) for one gateway key of an org.

    Scoped to the gateway key (its name), not only the org: another key of
    the same org using the same `Idempotency-Key` neither gets this key's
    answer replayed nor learns that the value is in use. The key name and
    the client's value are hashed together, length-prefixed so no two pairs
    collide.
    """
    digest = hashlib.sha256(f"{len(key)}:{key}:{client_key}".encode()).hexdigest()
    return f"{IDEMPOTENCY_PREFIX}{org}:{digest}"


SPEND_PREFIX = "turnout:spend:"
"""Hash per (org, period, period id): {org, squad:<name>, key:<name>} -> USD (`turnout.state.spend_store`)."""


def spend_key(org: str, period: str, period_id: str) -> str:
    """Key of one org's ledger for one period (`day` / `month`, id `2026-12-01` / `2026-12`)."""
    return f"{SPEND_PREFIX}{org}:{period}:{period_id}"


RECORDS_STREAM = "turnout:records"
"""Stream of attempt records (SPEC §9): fields {org, r: JSON row}, `MAXLEN ~ gateway.records_max`."""

BREAKER_TRANSITIONS_STREAM = "turnout:breaker:transitions"
"""Stream of breaker transitions of the targets (opened, closed, resting on a Retry-After): fields
{r: JSON event, `turnout.observability.breaker_log`}, capped by length and age (the dashboard's timeline)."""

OPEN_ATTEMPTS_PREFIX = "turnout:attempts:open:"
"""Hash per request id: attempt id -> its `started` record row (JSON), removed when the
attempt ends; what is left when a job re-runs is the dead run's lost attempts."""


def open_attempts_key(request_id: str) -> str:
    """Key of a request's attempts started and not yet ended."""
    return OPEN_ATTEMPTS_PREFIX + request_id


REFUSALS_ORG_PREFIX = "turnout:refusals:org:"
"""Stream per org: the door refusals of its authenticated callers (`turnout.state.refusals_stream`),
fields {r: JSON row}, `MAXLEN ~ gateway.refusals_max_per_org`; one tenant's flood evicts only its own rows."""

REFUSALS_UNIDENTIFIED = "turnout:refusals:unidentified"
"""Stream of the door refusals of callers not identified (no org: a 401, an unknown path before any
key was read), same fields and bound as an org's."""


def refusals_key(org: str | None) -> str:
    """Key of the refusals stream of `org` (percent-encoded, so no id reaches another's key), or of
    the callers not identified when `org` is None."""
    return REFUSALS_UNIDENTIFIED if org is None else REFUSALS_ORG_PREFIX + quote(org, safe="")


TENANCY_VERSION = "turnout:tenancy:version"
"""String counter: INCR on every tenancy write (fleet-wide config version)."""

TENANCY_ORGS = "turnout:tenancy:orgs"
"""Hash org id -> the config version of its last write (processes reload changed orgs only)."""

TENANCY_ORG_PREFIX = "turnout:tenancy:org:"
"""String per org: the JSON `turnout.stored.orgs.OrgDoc` (secrets sealed, keys hashed)."""

TENANCY_DELETED = "turnout:tenancy:deleted"
"""Set of org ids deleted through the admin API (the config file never re-creates them)."""

TENANCY_CHANNEL = "turnout:tenancy:changed"
"""Pub/sub channel: message = an org id just written; every process re-reads it."""


def tenancy_org_key(org: str) -> str:
    """Key of an org's document."""
    return TENANCY_ORG_PREFIX + org


CATALOG_DOC = "turnout:catalog:doc"
"""String: the JSON `turnout.stored.catalog.CatalogDoc` (models and providers; keys only as references)."""

CATALOG_VERSION = "turnout:catalog:version"
"""String counter: INCR on every catalog write (the catalog version; 0 = never written)."""

CATALOG_FILES = "turnout:catalog:files"
"""Set of the digests of every configuration file whose catalog was applied (a stale file is known)."""

CATALOG_OWNED = "turnout:catalog:owned"
"""String: JSON entry (`models.<id>`, `providers.<name>`) -> `turnout.catalog.ownership.Owned`: what the
configuration file wrote last (absent: a catalog written before the record existed)."""

CATALOG_CHANNEL = "turnout:catalog:changed"
"""Pub/sub channel: message = the new catalog version; every process re-reads the catalog."""


LIMIT_PREFIX = "turnout:limit:"
"""Per scope and counter (SPEC §10 limits): `rpm` / `tpm` hashes {l, t} (GCRA level
and time), `conc` / `streams` sorted sets of leases (member = lease id, score = expiry ms)."""


def limit_key(kind: str, org: str, scope_id: str | None, counter: str) -> str:
    """Key of one scope's limit counter: `turnout:limit:key:acme:ci-bot:rpm` (ids percent-encoded)."""
    parts = [kind, quote(org, safe="")] + ([quote(scope_id, safe="")] if scope_id is not None else [])
    return LIMIT_PREFIX + ":".join([*parts, counter])


RESERVATION_PREFIX = "turnout:reserve:"


def reservation_key(org: str, field: str, period: str, period_id: str) -> str:
    """Key of the reservations held against one hard budget in one period (sorted set, member
    `<request id> <µUSD>`, score expiry epoch ms): `turnout:reserve:acme:key%3Aci:day:2026-12-07`."""
    return RESERVATION_PREFIX + ":".join((quote(org, safe=""), quote(field, safe=""), period, period_id))


AUDIT_STREAM = "turnout:audit"
"""Stream of authenticated admin writes (who, what, when; no secrets): fields {e: JSON `AuditEntry`},
kept for the retention time (`XADD MINID ~`), never trimmed by count."""

AUDIT_REFUSED_STREAM = "turnout:audit:unauthenticated"
"""Stream of samples of admin writes refused before a caller was known: fields {e: JSON `AuditEntry`,
n: writes it stands for}, capped (`XADD MAXLEN ~`): a flood of them never touches `AUDIT_STREAM`."""


UI_SCORE_PREFIX = "turnout:ui:score:"
"""List per target `provider/model`: the dashboard's health-score samples,
newest first, each `<epoch s>:<score>`; at most a fixed number kept."""

UI_SCORE_TICK_PREFIX = "turnout:ui:score-tick:"
"""String per target (`SET NX PX`): a score sample was taken recently."""


def ui_score_key(target: str) -> str:
    """Key of a target's score samples."""
    return UI_SCORE_PREFIX + target


def ui_score_tick_key(target: str) -> str:
    """Key of a target's sampling guard."""
    return UI_SCORE_TICK_PREFIX + target


RESPONSE_PREFIX = "turnout:resp:"
"""String per (org, Response id): a stored Response and its conversation (`turnout.state.response_store`)."""

RESPONSE_INDEX_PREFIX = "turnout:resp-index:"
"""Sorted set per org: its stored Response ids, score = written at (epoch ms); the per-org cap evicts the oldest."""

MAX_RESPONSE_ID_CHARS = 200
"""Longest Response id looked up (Turnout's are `resp_` and 32 hex digits); a longer one is unknown."""


def response_key(org: str, response_id: str) -> str:
    """Key of one stored Response of `org` (the org id percent-encoded, so no id can reach another org's keys)."""
    return f"{RESPONSE_PREFIX}{quote(org, safe='')}:{response_id}"


def response_index_key(org: str) -> str:
    """Key of `org`'s index of stored Responses."""
    return RESPONSE_INDEX_PREFIX + quote(org, safe="")


EPOCH = "turnout:epoch"
"""String: a random token written once into an empty Redis (`turnout.state.epoch`); a process
that finds another one, or none, after a reconnect knows Redis lost what it held."""

UI_SESSION_PREFIX = "turnout:ui:session:"
"""String per dashboard session, keyed by the SHA-256 of its id (the id itself is only in the
browser's cookie): JSON `turnout.state.ui_sessions.SessionRecord`, expiring with the session (`SET EX`)."""

UI_LOGIN_FAILS_PREFIX = "turnout:ui:login-fails:"
"""Counter per client (`client:<address>`) or per tried key (`key:<SHA-256>`) of failed dashboard
logins in the current window (`INCR`, expiring at the window's end)."""
