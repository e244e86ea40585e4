"""The trace context a queued job carries (SPEC §9): the current (SERVER) span's `traceparent` when
tracing is on, nothing at all when it is off (no span, no header built). Real `redis-server`."""

from __future__ import annotations

import asyncio
import time

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis.asyncio import Redis

from support.jobs import job_payload
from turnout.config import parse_config
from turnout.observability.tracing import Telemetry, setup_tracing
from turnout.settings import Settings
from turnout.state import keys
from turnout.state.queue import job_deserializer
from turnout.wire import JobPayload, payload_decoder
from turnout_ingress.state import IngressState

CONFIG = """\
providers:
  p: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}
models:
  m: {offers: [{provider: p, model: m}]}
"""


async def _queued(redis_client: Redis, telemetry: Telemetry, request_id: str) -> JobPayload:
    """The payload the ingress puts on the queue for one job (read back from Redis)."""
    state = IngressState(parse_config(CONFIG, env={}), redis_client, redis_client, Settings.from_env({}), telemetry)
    payload = job_payload(request_id, time.time() + 30, reply_to=state.queue.reply_channel)
    waiting = asyncio.create_task(state.queue.submit(payload))
    deadline = time.monotonic() + 10
    while (raw := await redis_client.get(keys.JOB_PREFIX + request_id)) is None:
        assert time.monotonic() < deadline, "the job was never enqueued"
        await asyncio.sleep(0.01)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    return payload_decoder.decode(job_deserializer(raw)["a"][0])


async def test_with_tracing_off_the_job_carries_no_trace_context(redis_client: Redis) -> None:
    telemetry = setup_tracing("turnout-ingress", env={})
    assert telemetry.tracing is None
    assert (await _queued(redis_client, telemetry, "off-1")).trace == {}


async def test_with_tracing_on_the_job_carries_the_server_spans_traceparent(redis_client: Redis) -> None:
    spans = InMemorySpanExporter()
    telemetry = setup_tracing("turnout-ingress", env={}, span_exporters=[spans])
    with telemetry.tracer.start_as_current_span("POST /v1/chat/completions") as server:
        carried = (await _queued(redis_client, telemetry, "on-1")).trace
    assert [s.name for s in spans.get_finished_spans()] == ["POST /v1/chat/completions"]  # no enqueue span
    assert carried["traceparent"].split("-")[1:3] == [
        format(server.get_span_context().trace_id, "032x"),
        format(server.get_span_context().span_id, "016x"),
    ]
