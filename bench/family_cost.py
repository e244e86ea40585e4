#!/usr/bin/env python3
"""CPU per request spent in each provider family's translation, against `openai_compatible`, same run.

What is measured, per family: the request built for one call (`ApiFamily.build_request`: the
OpenAI request decoded, translated, encoded, signed for Bedrock) plus the answer read
(`read_outcome`: the provider's body decoded and translated to an OpenAI `chat.completion`) for
a non-streaming call; for a stream, the request built plus every event of a 20-chunk answer
translated (`stream_events`, fed the bytes as the simulator sent them, read by read). Only CPU
(`time.process_time`), no network: the answers are captured once from the in-process simulator
(`turnout_sim`) with each family's own requests, then replayed from memory. Families:
`openai_compatible` (the baseline: no translation), `azure_openai`, `anthropic`, `gemini`,
`vertex` (a Gemini model and a Claude model), `bedrock`.

Reported per family: ms per non-streaming request and per 20-chunk stream, and the difference
from `openai_compatible` in ms (the median of `--reps` interleaved rounds of `--n` calls each).
The bar (issue #39): no family more than 0.2 ms above `openai_compatible`.

Usage:
    .venv/bin/python bench/family_cost.py [--n 2000] [--reps 5] [--json out.json]

Traffic goes to 127.0.0.1 only (the capture), every loop is bounded by count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.google_keys import write_key_file
from turnout.adapters.base import CallSpec
from turnout.adapters.families import family_for
from turnout.adapters.google_tokens import AccessTokens
from turnout.aws.keys import join_key
from turnout.config import ProviderKind
from turnout.core.types import Target
from turnout_sim.app import start_in_background
from turnout_sim.credentials import AWS_TEST_KEYS

CHUNKS = 20
"""Content chunks of the streamed answer (and tokens of the complete one)."""
BAR_MS = 0.2
"""The issue's bar: CPU above `openai_compatible` per request, ms."""
REQUEST = {
    "model": "bench",
    "messages": [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "Say something about the weather in Paris today, please."},
    ],
    "max_tokens": CHUNKS,
    "temperature": 0.2,
}
AKID = "AKIASIMULATOR0000001"


@dataclass(frozen=True)
class Case:
    """One family's call: its name, the `CallSpec` of a non-streaming and of a streaming call."""

    name: str
    spec: CallSpec
    stream_spec: CallSpec


@dataclass
class Captured:
    """A family's answers as the simulator sent them: status, headers, body; a stream's reads."""

    case: Case
    status: int
    headers: httpx.Headers
    body: bytes
    stream_status: int
    stream_headers: httpx.Headers
    stream_reads: list[bytes]


def _spec(name: str, kind: ProviderKind, base_url: str, model: str, key: str, **fields: Any) -> Case:
    common: dict[str, Any] = {
        "target": Target(provider=name, model=model, catalog_model="bench"),
        "base_url": base_url,
        "api_key": key,
        "timeout_s": 10.0,
        "request_id": "bench-request-0001",
        "kind": kind,
        **fields,
    }
    body = json.dumps(REQUEST).encode()
    streamed = json.dumps({**REQUEST, "stream": True, "stream_options": {"include_usage": True}}).encode()
    return Case(name, CallSpec(body=body, **common), CallSpec(body=streamed, **common))


async def _cases(sim: str, workdir: Path) -> list[Case]:
    key_file = write_key_file(workdir / "sa.json", sim + "/token")
    token = await AccessTokens().token(str(key_file))  # made once: the bench measures translation, not tokens
    vertex = {"project": "bench-proj", "location": "us-central1"}
    return [
        _spec("openai_compatible", "openai_compatible", sim + "/v1", "bench", "sk-bench"),
        _spec("azure_openai", "azure_openai", sim, "bench", "az-bench", api_version="2024-10-21"),
        _spec("anthropic", "anthropic", sim, "claude-bench", "ant-bench"),
        _spec("gemini", "gemini", sim, "gemini-bench", "AIza-bench"),
        _spec("vertex (gemini)", "vertex", sim, "gemini-2.5-flash", token, **vertex),
        _spec("vertex (claude)", "vertex", sim, "claude-sonnet-4@20250514", token, **vertex),
        _spec(
            "bedrock",
            "bedrock",
            sim,
            "anthropic.claude-bench-v1:0",
            join_key(AKID, AWS_TEST_KEYS[AKID]),
            region="us-east-1",
        ),
    ]


def _family(spec: CallSpec) -> Any:
    family = family_for(spec.kind, "chat")
    assert family is not None
    return family


async def _capture(client: httpx.AsyncClient, case: Case) -> Captured:
    family = _family(case.spec)
    request = family.build_request(client, case.spec, stream=False)
    answer = await client.send(request)
    assert answer.status_code == 200, (case.name, answer.status_code, answer.text[:300])
    opened = await client.send(family.build_request(client, case.stream_spec, stream=True), stream=True)
    reads = [chunk async for chunk in opened.aiter_raw()]
    await opened.aclose()
    assert opened.status_code == 200, (case.name, opened.status_code)
    return Captured(case, answer.status_code, answer.headers, answer.content, opened.status_code, opened.headers, reads)


class _Reads(httpx.AsyncByteStream):
    """A stream body replayed read by read."""

    def __init__(self, reads: list[bytes]) -> None:
        self._reads = reads

    async def __aiter__(self) -> Any:
        for read in self._reads:
            yield read


def _complete(client: httpx.AsyncClient, captured: Captured, n: int) -> float:
    """CPU seconds of `n` non-streaming calls' translation (request built, answer read)."""
    family, spec = _family(captured.case.spec), captured.case.spec
    started = time.process_time()
    for _ in range(n):
        family.build_request(client, spec, stream=False)
        result = family.read_outcome(captured.status, captured.headers, captured.body, time.time())
        assert result.body is not None
    return time.process_time() - started


async def _streamed(client: httpx.AsyncClient, captured: Captured, n: int) -> float:
    """CPU seconds of `n` streams' translation (request built, every event translated)."""
    family, spec = _family(captured.case.stream_spec), captured.case.stream_spec
    events = 0
    started = time.process_time()
    for _ in range(n):
        request = family.build_request(client, spec, stream=True)
        response = httpx.Response(
            captured.stream_status,
            headers=captured.stream_headers,
            stream=_Reads(captured.stream_reads),
            request=request,
        )
        async for batch in family.stream_events(response):
            events += len(batch)
    elapsed = time.process_time() - started
    assert events >= n * CHUNKS, (captured.case.name, events)
    return elapsed


async def measure(n: int, reps: int) -> dict[str, dict[str, float]]:
    """{family: {"complete_ms", "stream_ms"}}: the median over `reps` interleaved rounds of CPU per
    call, ms (non-streaming over `n` calls, streams over `n // 10`)."""
    runner, sim = await start_in_background("127.0.0.1", 0)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            cases = await _cases(sim, Path(workdir))
            async with httpx.AsyncClient(timeout=10.0) as client:
                captured = [await _capture(client, case) for case in cases]
    finally:
        await runner.cleanup()
    streams = max(1, n // 10)
    samples: dict[str, dict[str, list[float]]] = {c.case.name: {"complete_ms": [], "stream_ms": []} for c in captured}
    async with httpx.AsyncClient(timeout=10.0) as client:
        for each in captured:  # warm-up: imports, caches, prepared requests
            _complete(client, each, 50)
            await _streamed(client, each, 5)
        for _ in range(reps):
            for each in captured:
                samples[each.case.name]["complete_ms"].append(_complete(client, each, n) * 1000 / n)
                samples[each.case.name]["stream_ms"].append(await _streamed(client, each, streams) * 1000 / streams)
    return {name: {k: statistics.median(v) for k, v in figures.items()} for name, figures in samples.items()}


def table(figures: dict[str, dict[str, float]]) -> str:
    """The report: per family, ms per call and the difference from `openai_compatible`."""
    base = figures["openai_compatible"]
    lines = [
        "| family | non-stream ms | vs openai_compatible | 20-chunk stream ms | vs openai_compatible | within 0.2 ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, f in figures.items():
        d_complete, d_stream = f["complete_ms"] - base["complete_ms"], f["stream_ms"] - base["stream_ms"]
        ok = "yes" if max(d_complete, d_stream) <= BAR_MS else "NO"
        lines.append(
            f"| {name} | {f['complete_ms']:.3f} | {d_complete:+.3f} | {f['stream_ms']:.3f} | {d_stream:+.3f} | {ok} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=2000, help="non-streaming calls per round (streams: n/10)")
    parser.add_argument("--reps", type=int, default=5, help="interleaved rounds (the median is reported)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    figures = asyncio.run(measure(args.n, args.reps))
    print(table(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
