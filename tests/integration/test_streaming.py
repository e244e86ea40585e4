"""The streaming direct path with the official openai SDK (SPEC §8).

Before the first content, failures are ordinary attempts the client never
sees; after it, the stream is committed and a failure ends it with an error
event and no `[DONE]`.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest

from support.gateway import KEY, KEY_RECOVER, KEY_STREAM, Gateway

pytestmark = pytest.mark.integration

MESSAGES: Any = [{"role": "user", "content": "hello"}]


def _full(n: int) -> str:
    return " ".join(f"tok{i}" for i in range(n))


def _stream(gw: Gateway, model: str, key: str = KEY, max_tokens: int = 12, **extra: Any) -> tuple[dict[str, str], str]:
    with gw.client(key).chat.completions.with_streaming_response.create(
        model=model, messages=MESSAGES, stream=True, max_tokens=max_tokens, **extra
    ) as response:
        headers = dict(response.headers)
        text = "".join(c.choices[0].delta.content or "" for c in response.parse() if c.choices)
    return headers, text


def _raw_frames(gw: Gateway, model: str, key: str = KEY, max_tokens: int = 60, **extra: Any) -> list[str]:
    frames = []
    with httpx.stream(
        "POST",
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        json={"model": model, "messages": MESSAGES, "stream": True, "max_tokens": max_tokens, **extra},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                frames.append(line[6:])
    return frames


def test_stream_success_has_turnout_headers_and_the_whole_answer(gateway: Gateway) -> None:
    headers, text = _stream(gateway, "s-ok")
    assert text == _full(12)
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["x-turnout-provider"] == "sim-a"
    assert headers["x-turnout-model"] == "s-ok"
    assert headers["x-turnout-attempts"] == "1"


def test_stream_503_before_first_token_falls_back_unseen(gateway: Gateway) -> None:
    headers, text = _stream(gateway, "s-503")
    assert text == _full(12)
    assert headers["x-turnout-provider"] == "sim-b"
    assert headers["x-turnout-fallback"] == "1"
    assert headers["x-turnout-attempts"] == "3"
    assert len(gateway.sim_log("s503~503")) == 2


def test_stream_error_envelope_as_first_event_falls_back(gateway: Gateway) -> None:
    headers, text = _stream(gateway, "s-bodyerr")
    assert text == _full(12)
    assert headers["x-turnout-provider"] == "sim-b"
    assert gateway.sim_log("sbe~bodyerr429")  # it was tried, and its 429 in a 200 stream never reached the client


def test_stream_slow_first_token_beyond_ttft_falls_back_within_the_bound(gateway: Gateway) -> None:
    started = time.monotonic()
    headers, text = _stream(gateway, "s-slow", KEY_STREAM)
    assert time.monotonic() - started < 2.9  # ttft_timeout_ms=500; without it the slow provider needs 3 s
    assert headers["x-turnout-provider"] == "sim-b"
    assert text == _full(12)


def test_stream_cut_after_content_ends_with_an_error_event_and_no_done(gateway: Gateway) -> None:
    frames = _raw_frames(gateway, "s-cut", max_tokens=60)
    assert frames[-1] != "[DONE]" and "[DONE]" not in frames
    assert '"error"' in frames[-1] and "stream_interrupted" in frames[-1]
    with pytest.raises(openai.APIError):
        _stream(gateway, "s-cut", max_tokens=60)
    assert len(gateway.sim_log("scut~cut40")) == 2  # one per request: never retried after the commit


def test_stream_cut_text_is_never_repeated(gateway: Gateway) -> None:
    frames = _raw_frames(gateway, "s-cut", max_tokens=60)
    text = "".join(
        (json.loads(f)["choices"][0]["delta"].get("content") or "") for f in frames[:-1] if json.loads(f).get("choices")
    )
    # a reset may lose what was still in flight, never repeat or reorder it
    assert text and _full(40).startswith(text)


def test_stream_stall_ends_with_an_error_and_the_gateway_serves_on(gateway: Gateway) -> None:
    started = time.monotonic()
    frames = _raw_frames(gateway, "s-stall", KEY_STREAM, max_tokens=30)
    assert time.monotonic() - started < 5.0  # stall_timeout_ms 500 ends it, long before the 10 s stall does
    assert "stream_stalled" in frames[-1]
    _, text = _stream(gateway, "s-ok")
    assert text == _full(12)


def test_stream_malformed_chunk_mid_stream_is_skipped_and_the_answer_completes(gateway: Gateway) -> None:
    frames = _raw_frames(gateway, "s-bad", max_tokens=12)
    assert frames[-1] == "[DONE]"
    assert all(f == "[DONE]" or f.startswith("{") for f in frames)


def test_stream_without_done_is_finalised_promptly(gateway: Gateway) -> None:
    started = time.monotonic()
    frames = _raw_frames(gateway, "s-nodone", max_tokens=12)
    assert frames[-1] == "[DONE]"
    assert time.monotonic() - started < 5.0  # at the end of the upstream body, not at a timeout


def test_stream_usage_chunk_only_when_asked(gateway: Gateway) -> None:
    frames = _raw_frames(gateway, "s-ok", max_tokens=5)
    assert not any('"usage":{' in f for f in frames)
    assert not any('"usage"' in f for f in frames)
    with gateway.client().chat.completions.with_streaming_response.create(
        model="s-ok",
        messages=MESSAGES,
        stream=True,
        max_tokens=5,
        stream_options={"include_usage": True},
    ) as response:
        chunks = list(response.parse())
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5


def test_stream_unknown_model_is_a_json_404_before_any_stream(gateway: Gateway) -> None:
    with pytest.raises(openai.NotFoundError):
        _stream(gateway, "no-such-model")


def _texts(frames: list[str]) -> str:
    return "".join(
        (json.loads(f)["choices"][0]["delta"].get("content") or "")
        for f in frames
        if f.startswith("{") and json.loads(f).get("choices")
    )


def test_stream_continuation_on_the_same_target_gives_the_full_answer_once(gateway: Gateway) -> None:
    frames = _raw_frames(gateway, "s-cont", KEY_RECOVER, max_tokens=40)
    assert frames[-1] == "[DONE]"
    assert _texts(frames) == _full(40)
    assert len({json.loads(f)["id"] for f in frames if f.startswith("{")}) == 1  # one seamless answer
    log = gateway.sim_log("scont~cut20,200")
    assert [e["step"] for e in log] == ["cut20", "200"]


def test_stream_continuation_reports_the_whole_answers_usage(gateway: Gateway) -> None:
    asked: dict[str, Any] = {"stream_options": {"include_usage": True}}
    whole = json.loads(_raw_frames(gateway, "s-ok", max_tokens=40, **asked)[-2])["usage"]
    frames = _raw_frames(gateway, "s-cont", KEY_RECOVER, max_tokens=40, **asked)
    usage = json.loads(frames[-2])["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (whole["prompt_tokens"], 40)
    assert usage["total_tokens"] == whole["prompt_tokens"] + 40


def test_stream_continuation_skips_a_target_rejecting_prefill(gateway: Gateway) -> None:
    frames = _raw_frames(gateway, "s-cont-next", KEY_RECOVER, max_tokens=40)
    assert frames[-1] == "[DONE]"
    assert _texts(frames) == _full(40)
    assert [e["status"] for e in gateway.sim_log("snp~cut20,noprefill")] == [200, 400]
    assert len(gateway.sim_log("snp-b")) == 1


def test_stream_continuation_failing_everywhere_ends_with_the_original_failure(gateway: Gateway) -> None:
    frames = _raw_frames(gateway, "s-cont-none", KEY_RECOVER, max_tokens=40)
    assert "[DONE]" not in frames
    assert "stream_interrupted" in frames[-1] and "prefill" not in frames[-1]
    assert _full(40).startswith(_texts(frames[:-1]))


def test_stream_client_disconnect_closes_the_upstream_within_a_second(gateway: Gateway) -> None:
    with httpx.stream(
        "POST",
        f"{gateway.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY}"},
        json={"model": "s-slowchunks", "messages": MESSAGES, "stream": True, "max_tokens": 50},
        timeout=30,
    ) as response:
        seen = 0
        for line in response.iter_lines():
            if line.startswith("data: "):
                seen += 1
            if seen >= 3:
                break
    left_at = time.time()
    deadline = time.monotonic() + 3
    entry: dict[str, object] = {}
    while time.monotonic() < deadline:
        entry = gateway.sim_log("sslowc~200i100")[0]
        if entry.get("end") is not None:
            break
        time.sleep(0.05)
    assert entry["end"] == "client_gone"
    assert float(entry["ended_s"]) - left_at < 1.0  # type: ignore[arg-type]


def _stream_with_key(gw: Gateway, model: str, key: str) -> httpx.Response:
    with httpx.stream(
        "POST",
        f"{gw.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {KEY}", "idempotency-key": key},
        json={"model": model, "messages": MESSAGES, "stream": True, "max_tokens": 3},
        timeout=30,
    ) as response:
        response.read()
        return response


def test_stream_idempotency_key_of_a_started_stream_is_a_clear_409(gateway: Gateway) -> None:
    assert _stream_with_key(gateway, "s-ok", "stream-once-1").status_code == 200
    again = _stream_with_key(gateway, "s-ok", "stream-once-1")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "idempotency_stream_started"


def test_stream_that_never_started_releases_its_idempotency_key(gateway: Gateway) -> None:
    first = _stream_with_key(gateway, "all-fail", "stream-failed-1")
    assert first.status_code == 502
    assert _stream_with_key(gateway, "all-fail", "stream-failed-1").status_code == 502  # a retry runs, no 409
