"""The worker process: arq settings, startup, and the one thin job function.

Owns: building the worker's objects once (config, catalog, shared upstream
client, router) and the `chat_completion` job: skip a job whose client is
gone or already answered, route it, store and publish the answer.
"""

from __future__ import annotations

import logging
import os
import random
import time
from typing import Any

import msgspec
from arq.connections import RedisSettings
from arq.worker import func

from turnout.adapters.transport import make_http_client
from turnout.answer import answer_of, error_body
from turnout.catalog import Catalog
from turnout.config import Config, load_config
from turnout.core.plan import UnknownModel
from turnout.errors import GatewayUnavailable
from turnout.health import Breakers
from turnout.router import RequestInfo, Router
from turnout.state.breaker_store import RedisBreakerStore
from turnout.state.queue import JOB_FUNCTION, job_deserializer, job_serializer
from turnout.wire import JobPayload, JobResult, payload_decoder, result_encoder
from turnout_worker.pickup import PushWorker

log = logging.getLogger("turnout.worker")
_json = msgspec.json.Decoder()


class WorkerServices(msgspec.Struct, kw_only=True):
    """What a job needs, built once per process at startup."""

    config: Config
    router: Router
    http: Any


async def startup(ctx: dict[str, Any]) -> None:
    """arq startup hook: build the router over a shared httpx client."""
    config: Config = ctx["config"]
    http = make_http_client(max_connections=config.raw.gateway.worker_max_jobs + 100)
    breakers = Breakers(
        RedisBreakerStore(ctx["redis"]), config.raw.breaker.settings(), on_store_error=config.raw.breaker.on_store_error
    )
    router = Router(catalog=Catalog(config), http=http, breakers=breakers, rng=random.Random())
    ctx["turnout"] = WorkerServices(config=config, http=http, router=router)


async def shutdown(ctx: dict[str, Any]) -> None:
    """arq shutdown hook: close the upstream client."""
    services: WorkerServices | None = ctx.get("turnout")
    if services is not None:
        await services.http.aclose()


async def _deliver(ctx: dict[str, Any], payload: JobPayload, result: JobResult) -> None:
    worker: PushWorker = ctx["worker"]
    ttl_s = ctx["turnout"].config.raw.gateway.result_ttl_s
    await worker.deliver(payload.request_id, payload.reply_to, result_encoder.encode(result), ttl_s)


async def chat_completion(ctx: dict[str, Any], raw_payload: bytes) -> str:
    """Serve one non-streaming chat job (arq function `chat_completion`).

    A re-run (after a worker died) first checks that the client still waits:
    past the deadline, or with a result already stored, it makes zero
    upstream calls.

    Returns:
        A short status word for arq's log ("served", "error 502", "skipped").
    """
    payload = payload_decoder.decode(raw_payload)
    services: WorkerServices = ctx["turnout"]
    time_left_s = payload.deadline_epoch_s - time.time()
    if time_left_s <= 0:
        return "skipped: deadline passed"
    if ctx.get("job_try", 1) > 1 and await ctx["redis"].exists(keys.result_key(payload.request_id)):
        return "skipped: already answered"
    request = _json.decode(payload.body)
    rid = payload.request_id
    try:
        plan, view = await services.router.plan(request["model"], payload.settings, payload.policy)
    except UnknownModel as exc:
        result = JobResult(
            request_id=rid, status_code=404, headers={"x-request-id": rid},
            body=error_body(str(exc), error_type="invalid_request_error", code="model_not_found", param="model"),
        )
        await _deliver(ctx, payload, result)
        return "error 404"
    except GatewayUnavailable as exc:
        result = JobResult(
            request_id=rid, status_code=503, headers={"x-request-id": rid, "retry-after": str(exc.retry_after_s)},
            body=error_body(exc.message, error_type="service_unavailable", code=exc.code),
        )
        await _deliver(ctx, payload, result)
        return "error 503"
    info = RequestInfo(
        request_id=rid, org=payload.org, squad=payload.squad, key=payload.key, requested_model=str(request["model"])
    )
    routed = await services.router.route(
        request, plan=plan, view=view, policy=payload.policy, time_left_s=time_left_s, info=info
    )
    status, headers, body = answer_of(routed, payload.request_id)
    await _deliver(ctx, payload, JobResult(request_id=payload.request_id, status_code=status, headers=headers, body=body))
    return "served" if status == 200 else f"error {status}"


def build_worker(config: Config, redis_url: str, *, burst: bool = False) -> PushWorker:
    """The worker for `config`, connected to `redis_url`.

    Job timeout = the operator's latency ceiling + 5 s, so the loop's own
    deadline always ends a job first; arq re-runs a job whose worker died once
    its in-progress key expires (job timeout + 10 s).
    """
    gateway = config.raw.gateway
    timeout_s = config.raw.ceilings.max_total_latency_ms / 1000 + 5
    return PushWorker(
        functions=[func(chat_completion, name=JOB_FUNCTION, timeout=timeout_s, max_tries=3)],
        redis_settings=RedisSettings.from_dsn(redis_url),
        on_startup=startup,
        on_shutdown=shutdown,
        ctx={"config": config},
        max_jobs=gateway.worker_max_jobs,
        job_timeout=timeout_s,
        keep_result=0,
        poll_delay=1.0,
        max_tries=3,
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        job_completion_wait=int(os.environ.get("TURNOUT_DRAIN_S", "25")),
        allow_abort_jobs=False,
        burst=burst,
        log_results=False,
    )


def run(config_path: str, redis_url: str) -> None:
    """Run one worker process until SIGINT / SIGTERM (blocking)."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop ships with uvicorn[standard]
        pass
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("turnout").setLevel(logging.INFO)
    config = load_config(config_path)
    worker = build_worker(config, redis_url)
    worker.run()
