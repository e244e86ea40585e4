"""The worker process: its settings (arq's `func`, the Redis URL), startup, and the one thin job function.

Owns: building the worker's objects once (config, catalog, shared upstream
client, router) and the `chat_completion` job: skip a job whose client is
gone or already answered, route it, store and publish the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from arq.worker import func

from turnout.answer import answer_of, error_body
from turnout.catalog.watch import CatalogWatch
from turnout.config import Config
from turnout.core.liveness import may_run
from turnout.core.plan import NoMatchingOffer, UnknownModel
from turnout.core.reserve import answer_tokens
from turnout.errors import GatewayUnavailable
from turnout.observability.jsonlog import configure_logging
from turnout.observability.telemetry import request_span
from turnout.router import RequestInfo, Router, Shipped
from turnout.router.after_answer import answer_first
from turnout.rules.google_fields import unusable_key_files
from turnout.runtime import Runtime, build_runtime, freeze_startup_heap
from turnout.settings import Settings
from turnout.state.errors import StateUnavailable, outage_kind
from turnout.state.jobs import JOB_FUNCTION, time_left_s
from turnout.state.prober_lease import ProberLease
from turnout.wire import JobPayload, JobResult, payload_decoder, result_encoder
from turnout_worker import observe
from turnout_worker.pickup import PushWorker
from turnout_worker.prober import ActiveProber, lease_ttl_s

log = logging.getLogger("turnout.worker")

MARK_LOST_TIMEOUT_S = 2.0
"""Longest a re-run waits to record its dead run's attempts as lost (seconds)."""
_json = msgspec.json.Decoder()


class WorkerServices:
    """What a job needs, built once per process at startup.

    Attributes:
        config: the validated configuration.
        runtime: the shared runtime (`turnout.runtime.build_runtime`, as the ingress builds it).
        obs: the side port and per-job scope.
        prober: the fleet's active prober (`turnout_worker.prober`; only the lease's holder probes).
    """

    def __init__(
        self, config: Config, runtime: Runtime, obs: observe.WorkerObservability, prober: ActiveProber
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.obs = obs
        self.prober = prober

    @property
    def router(self) -> Router:
        """The runtime's router."""
        return self.runtime.router


def worker_runtime(config: Config, redis: Any, settings: Settings, worker: PushWorker) -> Runtime:
    """The worker's runtime: its router's long waits between attempts free the job's slot
    (`PushWorker.sleep_off_slot`), and a job's first pause gives back its start pass
    (`turnout_worker.start_gate`)."""
    return build_runtime(config, redis, settings, role="worker", sleep=worker.sleep_off_slot, paused=worker.paused)


def _warn_unusable_key_files(config: Config) -> None:
    """Log a warning per `vertex` provider whose service-account file this worker cannot use
    (`unusable_key_files`): its calls fail as that provider's credential failures until it can."""
    for reason in unusable_key_files(config.raw.providers):
        log.warning("%s: this worker's calls to the provider fail as auth failures until it can be used", reason)


async def startup(ctx: dict[str, Any]) -> None:
    """Startup hook (arq's signature, `turnout_worker.runner`): build the runtime (`worker_runtime`).

    First, for a worker whose start-up AOF check could not reach Redis, that
    check, now that Redis answers (`ctx["persistence_check"]`).

    Raises:
        PersistenceRefused: Redis runs without AOF and that is not allowed (the worker stops).
    """
    if (check := ctx.get("persistence_check")) is not None:
        await check()
    config: Config = ctx["config"]
    settings: Settings = ctx["settings"]
    runtime = worker_runtime(config, ctx["redis"], settings, ctx["worker"])
    obs = observe.WorkerObservability(runtime.obs, settings)
    await runtime.start(ctx["redis"], bootstrap=False)
    live = runtime.catalog_watch.live
    live.on_swap(lambda swapped, _catalog: _warn_unusable_key_files(swapped))
    _warn_unusable_key_files(live.config)
    lease = ProberLease(ctx["redis"], lease_ttl_s())
    prober = ActiveProber(runtime.catalogs, runtime.breakers, runtime.http, lease, runtime.directory.scrubber)
    ctx["turnout"] = WorkerServices(config, runtime, obs, prober)
    obs.start()
    prober.start()
    if ctx.get("freeze_heap"):  # set by the process entry point (`run`)
        log.info("start-up heap frozen: %d objects", freeze_startup_heap())


async def shutdown(ctx: dict[str, Any]) -> None:
    """Shutdown hook (arq's signature): flush, stop the side port, close the upstream clients."""
    services: WorkerServices | None = ctx.get("turnout")
    if services is not None:
        await services.prober.stop()
        services.obs.stop()
        await services.runtime.stop()


async def _deliver(ctx: dict[str, Any], payload: JobPayload, result: JobResult) -> None:
    """Deliver `result`, freeing the request's concurrency slots in the same script; its `tpm`
    charge settled to the answer's usage goes with the ledger's next write (issue #43)."""
    worker: PushWorker = ctx["worker"]
    ttl_s = ctx["turnout"].config.raw.gateway.result_ttl_s
    if payload.tpm and result.status_code == 200:
        used = answer_tokens(result.body)
        if used is not None:
            ctx["turnout"].runtime.obs.spend.charge(payload.org, payload.tpm, used - payload.estimate)
    encoded = result_encoder.encode(result)
    await worker.deliver(payload.request_id, payload.reply_to, encoded, ttl_s, payload.lease_sets)


async def chat_completion(ctx: dict[str, Any], raw_payload: bytes) -> str:
    """Job function `chat_completion` (an arq `func`): `_serve` inside the job's span (trace continued from the ingress),
    holding a pass of the worker's start gate until its first upstream call or wait
    (`turnout_worker.start_gate`)."""
    async with ctx["worker"].start_gate.start():
        return await _chat_completion(ctx, raw_payload)


async def _chat_completion(ctx: dict[str, Any], raw_payload: bytes) -> str:
    payload = payload_decoder.decode(raw_payload)
    obs: observe.WorkerObservability = ctx["turnout"].obs
    with obs.job(payload, ctx.get("enqueue_time")) as span:
        try:
            # a plain success's bookkeeping runs after its delivery (`turnout.router.after_answer`)
            async with answer_first():
                result = await _serve_or_500(ctx, payload)
        finally:  # its costs are in the ledger's batch now: its reservations go with them, in one write
            if payload.holds:
                ctx["turnout"].runtime.obs.spend.settle(payload.org, payload.holds)
        observe.set_job_result(span, result)
    return result


async def _serve_or_500(ctx: dict[str, Any], payload: JobPayload) -> str:
    """`_serve`, or a 500 delivered when it raises (every accepted job is answered:
    a bug here must not leave the client hanging)."""
    try:
        return await _serve(ctx, payload)
    except Exception:
        log.exception("job %s failed inside the gateway", payload.request_id)
        await _deliver(
            ctx,
            payload,
            JobResult(
                request_id=payload.request_id,
                status_code=500,
                headers={"x-request-id": payload.request_id},
                body=error_body(
                    "The gateway hit an internal error; the request was not completed.",
                    error_type="server_error",
                    code="internal_error",
                ),
            ),
        )
        return "error 500"


def _time_left_s(ctx: dict[str, Any], payload: JobPayload, store_now_ms: int) -> float:
    """Seconds the client still waits, measured on Redis's clock (not this host's).

    `budget_ms` counts from the job's queue score (Redis `TIME` at enqueue);
    a payload without it (queued by an older ingress) falls back to the
    ingress's `deadline_epoch_s` on this host's clock.
    """
    if payload.budget_ms <= 0 or "score" not in ctx:
        return payload.deadline_epoch_s - time.time()
    return time_left_s(payload, int(ctx["score"]), store_now_ms)


async def _mark_lost(services: WorkerServices, request_id: str, run: int) -> None:
    """A re-run's first act: the dead run's attempts that never ended become `lost` records.

    Bounded (`MARK_LOST_TIMEOUT_S`); on a Redis failure they stay open, and
    readers call them lost after their deadline (`turnout.core.attempt_phases`).
    """
    writer = services.runtime.obs.records
    if writer is None:
        return
    try:
        async with asyncio.timeout(MARK_LOST_TIMEOUT_S):
            lost = await writer.mark_lost(request_id, run)
    except (StateUnavailable, TimeoutError) as exc:
        log.warning("job %s re-run: earlier attempts not marked lost (%s)", request_id, outage_kind(exc))
        return
    if lost:
        log.warning("job %s re-run %d: %d attempt(s) of the dead run recorded as lost", request_id, run, lost)


async def _catch_up(watch: CatalogWatch, version: int) -> None:
    """Read the catalog now when the job was accepted on a newer one than this worker's (else the
    watch brings it within 2 s); an unreachable Redis leaves the catalog in force."""
    if version > watch.live.version:
        with contextlib.suppress(StateUnavailable):
            await watch.refresh()


async def _serve(ctx: dict[str, Any], payload: JobPayload) -> str:
    """Serve one non-streaming chat job.

    A re-run (after a worker died) first records the dead run's unended
    attempts as lost, then checks that the client still waits: past the
    deadline, or with a result already stored, it makes zero upstream calls.
    Its attempt records carry `is_rerun`.

    Returns:
        A short status word ("served", "error 502", "skipped").
    """
    services: WorkerServices = ctx["turnout"]
    worker: PushWorker = ctx["worker"]
    run = int(ctx.get("job_try", 1))
    if run > 1:
        await _mark_lost(services, payload.request_id, run)
    store_now_ms = await worker.store_now_ms()  # from the claim: no round trip
    time_left_s = _time_left_s(ctx, payload, store_now_ms)
    skipped = await _why_skip(worker, payload, run, time_left_s)
    if skipped is not None:
        return f"skipped: {skipped}"
    request = _json.decode(payload.body)
    request.pop("provider", None)  # the preferences ride in the payload; never sent upstream
    await _catch_up(services.runtime.catalog_watch, payload.catalog_version)
    catalog = services.router.catalog  # this job's catalog to its end, whatever changes meanwhile
    try:
        shipped = None if payload.health is None else Shipped(payload.health, store_now_ms / 1000)
        plan, view = await services.router.plan(
            request["model"],
            payload.settings,
            payload.policy,
            payload.org,
            payload.preferences,
            catalog=catalog,
            shipped=shipped,
        )
    except (UnknownModel, NoMatchingOffer, GatewayUnavailable) as exc:
        refused = _unplanned(exc, payload.request_id)
        await _deliver(ctx, payload, refused)
        return f"error {refused.status_code}"
    info = _request_info(payload, request, run, time_left_s)
    started = time.monotonic()
    with request_span(services.obs.telemetry.tracing, info, own=False):  # the job span is the request's
        routed = await services.router.route(
            request,
            plan=plan,
            view=view,
            policy=payload.policy,
            time_left_s=time_left_s,
            info=info,
            catalog=catalog,
            native=payload.native,
        )
    status, headers, body = answer_of(routed, payload.request_id)
    if status != 504:  # a job cut by its deadline says nothing of how long serving takes
        worker.service_times.add((time.monotonic() - started) * 1000)
    result = JobResult(
        request_id=payload.request_id, status_code=status, headers=headers, body=body, shape=routed.shape
    )
    await _deliver(ctx, payload, result)
    return "served" if status == 200 else f"error {status}"


async def _why_skip(worker: PushWorker, payload: JobPayload, run: int, time_left_s: float) -> str | None:
    """Why the job must not run (its deadline passed, its client or ingress gone, its lease lapsed,
    a re-run's answer already stored), or None to run it. Binds the job to its ingress on the way
    (the worker then hears that ingress leave)."""
    if time_left_s <= 0:
        return "deadline passed"
    if worker.client_left(payload.request_id):
        return "client left"
    worker.bind_ingress(payload.request_id, payload.reply_to, payload.keyed)
    if not may_run(payload.keyed, worker.ingress_gone(payload.reply_to)):
        return "ingress gone"  # nobody to answer: withdrawn unrun (`turnout.core.liveness`)
    if not worker.lease_held():  # stalled since its claim: another worker may run it now
        return "lease lapsed"
    if run > 1 and await worker.store.answered(payload.request_id):
        return "already answered"
    return None


def _unplanned(exc: UnknownModel | NoMatchingOffer | GatewayUnavailable, rid: str) -> JobResult:
    """The error answer of a job that could not be planned: 404 unknown model, 400 no offer
    matching the preferences, 503 (with `Retry-After`) the gateway unavailable."""
    if isinstance(exc, GatewayUnavailable):
        return JobResult(
            request_id=rid,
            status_code=503,
            headers={"x-request-id": rid, "retry-after": str(exc.retry_after_s)},
            body=error_body(exc.message, error_type="service_unavailable", code=exc.code),
        )
    status, code, param = (
        (404, "model_not_found", "model") if isinstance(exc, UnknownModel) else (400, "no_matching_offer", "provider")
    )
    return JobResult(
        request_id=rid,
        status_code=status,
        headers={"x-request-id": rid},
        body=error_body(str(exc), error_type="invalid_request_error", code=code, param=param),
    )


def _request_info(payload: JobPayload, request: dict[str, Any], run: int, time_left_s: float) -> RequestInfo:
    """What the router records of the job's `request` (run `run`, `time_left_s` seconds left)."""
    return RequestInfo(
        request_id=payload.request_id,
        org=payload.org,
        squad=payload.squad,
        key=payload.key,
        requested_model=str(request["model"]),
        strategy=payload.settings.strategy_rule,
        run=run,
        deadline_s=time.time() + time_left_s,
        operation=payload.operation,
    )


def build_worker(
    config: Config,
    redis_url: str,
    *,
    settings: Settings | None = None,
    persistence_check: Callable[[], Awaitable[object]] | None = None,
) -> PushWorker:
    """The worker for `config`, connected to `redis_url` (settings: read from the process
    environment by default; `TURNOUT_DRAIN_S` is how long a stopping worker waits for its jobs;
    `persistence_check`: the start-up AOF check to run once Redis answers, see `startup`).

    Job timeout = the operator's latency ceiling + 5 s, so the loop's own
    deadline always ends a job first; a job whose worker died is re-run once
    its lease (`gateway.job_lease_s`, renewed while the worker lives) expires.
    """
    settings = settings if settings is not None else Settings.from_env(os.environ)
    gateway = config.raw.gateway
    timeout_s = config.raw.ceilings.max_total_latency_s + 5
    return PushWorker(
        functions=[func(chat_completion, name=JOB_FUNCTION, timeout=timeout_s, max_tries=3)],
        redis_url=redis_url,
        on_startup=startup,
        on_shutdown=shutdown,
        ctx={"config": config, "settings": settings, "persistence_check": persistence_check},
        max_jobs=gateway.worker_max_jobs,
        job_timeout=timeout_s,
        poll_delay=1.0,
        max_tries=3,
        job_completion_wait=settings.drain_whole_s,
        lease_s=gateway.job_lease_s,
        start_passes=gateway.worker_start_passes,
    )


def run(
    config: Config,
    redis_url: str,
    settings: Settings | None = None,
    persistence_check: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Run one worker process for `config` until SIGINT / SIGTERM (blocking; settings: read from
    the process environment by default; `persistence_check`: see `build_worker`).

    Raises:
        PersistenceRefused: from `persistence_check` (the CLI exits 3).
    """
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop ships with uvicorn[standard]
        pass
    configure_logging(observe.SERVICE_NAME)
    settings = settings if settings is not None else Settings.from_env(os.environ)
    worker = build_worker(config, redis_url, settings=settings, persistence_check=persistence_check)
    worker.ctx["freeze_heap"] = True  # this process serves until it stops: `freeze_startup_heap` after start-up
    worker.run()
