"""The fault-scenario DSL: parse `label~step,step,...` into frozen steps.

Owns: the grammar of scenario steps and the pure parsing of model names and
`x-sim-scenario` header values into `Step` tuples.
Must not import: anything outside the standard library; no I/O, no clock,
no asyncio. Everything here is a pure function of its arguments.

Grammar (case-insensitive, whitespace around steps ignored)::

    scenario := step ("," step)*
    step     := base ["i" INT] ["+" INT "ms"]
    base     := "200" | STATUS | STATUS "nr" | STATUS "sr" | "429ra" INT | "429rad" INT | "429ram" INT
              | "429rr" DURATION | "403rl" | "quota" | "ctx" | "policy" | "cf400" | "cf200" | "safety"
              | "bodyerr" | "bodyerr429" | "reset" | "hang" | "close"
              | "slow" INT | "cut" INT | "stall" INT | "badchunk" INT
              | "nodone" | "down" INT "s" | "noprefill"
              | "fail" INT | "cap" INT | "len" INT

`i<N>` spaces streamed content chunks N ms apart (only on steps that stream
content); `+<N>ms` waits N ms before the response head (any step).

Steps that answer 200 produce a deterministic completion: the words
`tok0 tok1 ... tok{N-1}`, N = `max_completion_tokens` / `max_tokens` (capped
at 4096) or 12; streamed, one content chunk per word (`tok0`, ` tok1`, ...).
That answer ends on its own (`finish_reason: stop`, `stop_reason: end_turn`):
the model happened to say exactly as much as the limit allowed.

`len<N>` (N = 1..4096 tokens) answers like `200` (and takes `i<N>`) from a
model whose full answer is N tokens long: a request whose `max_tokens` /
`max_completion_tokens` is below N gets the first `max_tokens` of them, cut,
with `finish_reason: length` on the OpenAI wire and `stop_reason:
max_tokens` on the Anthropic one (as the providers report a truncated
answer); any other request gets all N with `stop` / `end_turn`.

On the OpenAI wire `n` (1..128) asks for n choices, index 0..n-1: choice 0
is the answer above, choice k >= 1 the same with each word prefixed by
`c<k>` (`c1tok0 c1tok1 ...`), each the same length and cut alike;
`usage.completion_tokens` counts every choice's tokens. Streamed, each
choice gets its role chunk, then the content chunks go round-robin over the
choices (one word of each in turn), then each choice's finish chunk.

Assistant prefill: when the request's last message has role `assistant` and
string content, that content is a prefill. If it is exactly the first K words
of the answer joined by single spaces (0 <= K <= N), optionally followed by
one space (`tok0 tok1 tok2` or `tok0 tok1 tok2 `), the answer continues after
it: the content is the rest of the text, so that prefill + content == the
full answer (`" tok3 ... tok{N-1}"`, or `"tok3 ... tok{N-1}"` after a
trailing space; empty when K = N), streamed as the remaining per-word chunks,
and `usage.completion_tokens` is N - K. Any other prefill gets the full answer.
`cut<N>`, `stall<N>` and `badchunk<N>` count N over the content chunks this
response actually sends (the continuation's, with a prefill).

`fail<P>` (P = 0..100, percent) answers 503 with the provider's realistic
body with probability P %, otherwise exactly like `200` (so it takes `i<N>`).
The roll of the k-th request of a scenario key is a pure function of the
simulator's seed, the key and k (BLAKE2b; see `faults.fail_roll`), so a run
is reproducible and independent of any other key's traffic.

`cap<N>` (N = 1..100000, requests per second) is a provider with capacity N
for its scenario key: a request is served like `200` when fewer than N
requests of that key were admitted in the last second (sliding window over
arrival times; refused requests do not count), otherwise it gets the wire's
overload answer: 503 "overloaded" with `Retry-After: 1` on the OpenAI
routes, 529 `overloaded_error` (as the bare `529` step) on the Anthropic
route.

`cf400` is Azure's prompt filter (400 `content_filter`) on the OpenAI routes, `policy` on the
Anthropic one; `cf200` a chat completion like `200` whose every choice the filter ended
(`finish_reason: content_filter`, no content unless streamed), a `200` on other routes;
`safety` is `cf200` by its Google name: on the Gemini and Vertex AI routes both answer a
candidate the safety filters ended (`finishReason: SAFETY`), `cf400` and `policy` a blocked
prompt (`promptFeedback.blockReason`).

`noprefill` answers 400 `invalid_request_error` ("Assistant prefill is not
supported for this model ...") when the request carries a prefill (any
assistant last message with string content, even an empty or non-matching
one); otherwise it behaves exactly like `200` (and so takes `i<N>`).

Each request's `GET /sim/log` entry records how its connection ended: `end`
is `complete` (response fully written), `client_gone` (the client left
first; noticed within ~20 ms while the simulator waits: latency, `slow`,
`i<N>` gaps, `hang`, `stall`), `fault` (reset/closed by `reset`, `close`,
`cut<N>`, or a held connection ended by server shutdown) or null while
open, and `ended_s` is when (epoch seconds).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace

SEPARATOR = "~"
"""Separates the free-text label from the steps in a model name."""

ERROR_STATUSES: frozenset[int] = frozenset({400, 401, 403, 404, 408, 413, 422, 429, 500, 501, 502, 503, 504, 505, 529})
"""Bare HTTP statuses a step may name (besides 200)."""

MAX_MS = 600_000
"""Upper bound for any millisecond argument (10 minutes)."""
MAX_SECONDS = 86_400
"""Upper bound for any second argument (one day)."""
MAX_CHUNKS = 4096
"""Upper bound for chunk counts; also the cap on generated tokens."""
MAX_CAPACITY_PER_S = 100_000
"""Upper bound for `cap<N>`, in requests per second."""


class StepKind(enum.StrEnum):
    """What one step does to the request that consumes it."""

    OK = "ok"  # 200 success
    ERROR = "error"  # bare error status with the realistic body
    RETRY_AFTER = "retry_after"  # 429 + Retry-After: <seconds>
    RETRY_AFTER_DATE = "retry_after_date"  # 429 + Retry-After: <HTTP-date>
    RETRY_AFTER_MS = "retry_after_ms"  # 429 + retry-after-ms: <ms>
    RESET_REQUESTS = "reset_requests"  # 429 + x-ratelimit-reset-requests
    RATE_LIMIT_403 = "rate_limit_403"  # 403 whose body speaks of a rate limit
    QUOTA = "quota"  # 429 insufficient_quota
    USAGE_CAP = "usage_cap"  # 429 "usage limit reached" + the reset headers of `usagecap<duration>`
    CONTEXT = "context"  # 400 context_length_exceeded
    POLICY = "policy"  # 400 content_policy_violation
    PROMPT_FILTER = "prompt_filter"  # 400 Azure content_filter (the prompt filter)
    FILTERED = "filtered"  # 200 chat completion with finish_reason content_filter
    BODY_ERROR = "body_error"  # 200 carrying a server_error envelope
    BODY_ERROR_429 = "body_error_429"  # 200 carrying a rate-limit envelope
    RESET = "reset"  # TCP RST before any response byte
    HANG = "hang"  # never answer
    CLOSE = "close"  # clean close before any response byte
    SLOW = "slow"  # success, first body byte / content chunk late
    CUT = "cut"  # connection closed mid-body
    STALL = "stall"  # body stops, connection kept open
    BAD_CHUNK = "bad_chunk"  # one malformed SSE event
    NO_DONE = "no_done"  # stream without `data: [DONE]`
    DOWN = "down"  # 503 for a while from first request, then 200
    NO_PREFILL = "no_prefill"  # 400 if the request has an assistant prefill, else 200
    FAIL = "fail"  # 503 with probability P % (seeded roll per request), else 200
    CAP = "cap"  # 200 within N requests per second, else overloaded
    LENGTH = "length"  # 200 from a model whose full answer is N tokens (cut by a smaller max_tokens)


# Kinds whose response streams content chunks, so `i<N>` makes sense.
_STREAMING_KINDS = frozenset(
    {StepKind.OK, StepKind.SLOW, StepKind.CUT, StepKind.STALL, StepKind.BAD_CHUNK, StepKind.NO_DONE, StepKind.DOWN}
    | {StepKind.NO_PREFILL, StepKind.FAIL, StepKind.CAP, StepKind.LENGTH, StepKind.FILTERED}
)

_FIXED_STATUS = {
    StepKind.OK: 200,
    StepKind.RETRY_AFTER: 429,
    StepKind.RETRY_AFTER_DATE: 429,
    StepKind.RETRY_AFTER_MS: 429,
    StepKind.RESET_REQUESTS: 429,
    StepKind.RATE_LIMIT_403: 403,
    StepKind.QUOTA: 429,
    StepKind.USAGE_CAP: 429,
    StepKind.CONTEXT: 400,
    StepKind.POLICY: 400,
    StepKind.PROMPT_FILTER: 400,
    StepKind.FILTERED: 200,
    StepKind.BODY_ERROR: 200,
    StepKind.BODY_ERROR_429: 200,
    StepKind.SLOW: 200,
    StepKind.CUT: 200,
    StepKind.STALL: 200,
    StepKind.BAD_CHUNK: 200,
    StepKind.NO_DONE: 200,
    StepKind.LENGTH: 200,
}

_KEYWORDS = {
    "403rl": StepKind.RATE_LIMIT_403,
    "quota": StepKind.QUOTA,
    "ctx": StepKind.CONTEXT,
    "policy": StepKind.POLICY,
    "cf400": StepKind.PROMPT_FILTER,
    "cf200": StepKind.FILTERED,
    "safety": StepKind.FILTERED,
    "bodyerr": StepKind.BODY_ERROR,
    "bodyerr429": StepKind.BODY_ERROR_429,
    "reset": StepKind.RESET,
    "hang": StepKind.HANG,
    "close": StepKind.CLOSE,
    "nodone": StepKind.NO_DONE,
    "noprefill": StepKind.NO_PREFILL,
}

_STEP_RE = re.compile(r"^(?P<base>[a-z0-9.]+?)(?:i(?P<interval>\d+))?(?:\+(?P<latency>\d+)ms)?$")
_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|h|m|s))+$")
# (regex, kind, field holding the number, minimum, maximum)
_NUMBERED = (
    (re.compile(r"^429ra(\d+)$"), StepKind.RETRY_AFTER, "seconds", 0, MAX_SECONDS),
    (re.compile(r"^429rad(\d+)$"), StepKind.RETRY_AFTER_DATE, "seconds", 0, MAX_SECONDS),
    (re.compile(r"^429ram(\d+)$"), StepKind.RETRY_AFTER_MS, "delay_ms", 0, MAX_MS),
    (re.compile(r"^slow(\d+)$"), StepKind.SLOW, "delay_ms", 0, MAX_MS),
    (re.compile(r"^cut(\d+)$"), StepKind.CUT, "count", 0, MAX_CHUNKS),
    (re.compile(r"^stall(\d+)$"), StepKind.STALL, "count", 0, MAX_CHUNKS),
    (re.compile(r"^badchunk(\d+)$"), StepKind.BAD_CHUNK, "count", 1, MAX_CHUNKS),
    (re.compile(r"^down(\d+)s$"), StepKind.DOWN, "seconds", 1, MAX_SECONDS),
    (re.compile(r"^fail(\d+)$"), StepKind.FAIL, "percent", 0, 100),
    (re.compile(r"^cap(\d+)$"), StepKind.CAP, "capacity_per_s", 1, MAX_CAPACITY_PER_S),
    (re.compile(r"^len(\d+)$"), StepKind.LENGTH, "answer_tokens", 1, MAX_CHUNKS),
)


_FORMS = (
    "a status (200 400 401 403 404 408 413 422 429 500 501 502 503 504 505 529), <status>nr, <status>sr, "
    "429ra<s>, 429rad<s>, 429ram<ms>, 429rr<duration>, 403rl, quota, usagecap<duration>, ctx, policy, "
    "cf400, cf200, safety, "
    "bodyerr, bodyerr429, reset, hang, close, slow<ms>, cut<n>, stall<n>, badchunk<n>, "
    "nodone, down<s>s, noprefill, fail<percent>, cap<per second>, len<tokens>; optionally followed by i<ms> and/or +<ms>ms"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One parsed scenario step.

    Attributes:
        kind: what the step does.
        token: the step's text as written (stripped), recorded in the log.
        status: HTTP status the step answers with; None for socket faults
            (reset, hang, close), for `down`, `fail` and `cap`, whose status
            depends on time, chance or load (see `faults.Verdict`), and for
            `noprefill`, whose status depends on the request.
        count: chunk count for `cut`/`stall`; 1-based content-event index
            for `badchunk`; None otherwise.
        delay_ms: milliseconds for `slow` (first byte / first content chunk
            delay) and `429ram` (the `retry-after-ms` value); None otherwise.
        seconds: seconds for `429ra`/`429rad` (Retry-After) and `down`
            (outage length); None otherwise.
        duration: the `x-ratelimit-reset-requests` value for `429rr` and
            `usagecap`, in OpenAI's duration syntax (`6m0s`, `20ms`, `1s`); None otherwise.
        percent: failure probability of `fail`, percent 0..100; None otherwise.
        capacity_per_s: requests per second `cap` serves, 1..100000; None
            otherwise.
        answer_tokens: length of the model's full answer for `len`, in
            tokens (1..4096; a smaller `max_tokens` cuts it); None otherwise.
        interval_ms: gap between streamed content chunks, in ms (`i<N>`).
        latency_ms: wait before the response head, in ms (`+<N>ms`).
        should_retry: the `x-should-retry` header an error status step sends (`<status>nr`:
            "false", `<status>sr`: "true", as OpenAI's API does); None: no such header.
    """

    kind: StepKind
    token: str
    status: int | None = None
    count: int | None = None
    delay_ms: int | None = None
    seconds: int | None = None
    duration: str | None = None
    percent: int | None = None
    capacity_per_s: int | None = None
    answer_tokens: int | None = None
    interval_ms: int = 0
    latency_ms: int = 0
    should_retry: str | None = None


DEFAULT_STEP = Step(kind=StepKind.OK, token="200", status=200)
"""What a model name without `~` always gets."""


def _bounded(value: str, what: str, low: int, high: int) -> int:
    number = int(value)
    if not low <= number <= high:
        raise ValueError(f"{what} must be between {low} and {high}, got {number}")
    return number


def _parse_base(base: str, token: str) -> Step:
    """Map a step's base (no interval, no latency) to a Step."""
    word = {"nr": "false", "sr": "true"}.get(base[3:]) if len(base) == 5 and base[:3].isdigit() else None
    if word is not None:
        status = int(base[:3])
        if status not in ERROR_STATUSES:
            raise ValueError(f"{base[3:]} follows an error status (503nr), not {status}")
        return Step(kind=StepKind.ERROR, token=token, status=status, should_retry=word)
    if base.isdigit():
        status = int(base)
        if status == 200:
            return Step(kind=StepKind.OK, token=token, status=200)
        if status in ERROR_STATUSES:
            return Step(kind=StepKind.ERROR, token=token, status=status)
        allowed = " ".join(str(s) for s in sorted(ERROR_STATUSES | {200}))
        raise ValueError(f"unsupported status {status}; expected one of {allowed}")
    kind = _KEYWORDS.get(base)
    if kind is not None:
        return Step(kind=kind, token=token, status=_FIXED_STATUS.get(kind))
    for prefix, reset_kind in (("429rr", StepKind.RESET_REQUESTS), ("usagecap", StepKind.USAGE_CAP)):
        if base.startswith(prefix):
            duration = base[len(prefix) :]
            if not _DURATION_RE.match(duration):
                raise ValueError(f"{prefix} needs an OpenAI duration such as 6m0s, 20ms or 1s, got {duration!r}")
            return Step(kind=reset_kind, token=token, status=429, duration=duration)
    for regex, kind, field, low, high in _NUMBERED:
        match = regex.match(base)
        if match:
            number = _bounded(match.group(1), field, low, high)
            return Step(
                kind=kind,
                token=token,
                status=_FIXED_STATUS.get(kind),
                count=number if field == "count" else None,
                delay_ms=number if field == "delay_ms" else None,
                seconds=number if field == "seconds" else None,
                percent=number if field == "percent" else None,
                capacity_per_s=number if field == "capacity_per_s" else None,
                answer_tokens=number if field == "answer_tokens" else None,
            )
    raise ValueError(f"unknown step; expected one of: {_FORMS}")


def parse_step(text: str) -> Step:
    """Parse one step such as `200`, `503+50ms`, `200i20` or `429rr6m0s`.

    Args:
        text: the step's text; surrounding whitespace is ignored, case too.

    Returns:
        The parsed step.

    Raises:
        ValueError: the text is not a valid step; the message says why.
    """
    token = text.strip()
    if not token:
        raise ValueError("empty step")
    match = _STEP_RE.match(token.lower())
    if match is None:
        raise ValueError(f"step {token!r} is not of the form base[i<N>][+<N>ms]")
    try:
        step = _parse_base(match.group("base"), token)
        interval, latency = match.group("interval"), match.group("latency")
        if interval is not None:
            if step.kind not in _STREAMING_KINDS:
                raise ValueError("a chunk interval i<N> only applies to steps that stream content")
            step = replace(step, interval_ms=_bounded(interval, "interval_ms", 0, MAX_MS))
        if latency is not None:
            step = replace(step, latency_ms=_bounded(latency, "latency_ms", 0, MAX_MS))
    except ValueError as exc:
        raise ValueError(f"step {token!r}: {exc}") from None
    return step


def parse_scenario(text: str) -> tuple[Step, ...]:
    """Parse a comma-separated list of steps (`200,503+50ms,reset`).

    Args:
        text: the steps part of a model name (after `~`) or the value of the
            `x-sim-scenario` header.

    Returns:
        The steps in order; the last one repeats forever once reached.

    Raises:
        ValueError: the text is empty or a step is invalid; the message names
            the step and its 1-based position.
    """
    if not text.strip():
        raise ValueError("empty scenario: expected steps such as 200,503,reset")
    steps = []
    for position, part in enumerate(text.split(","), start=1):
        try:
            steps.append(parse_step(part))
        except ValueError as exc:
            raise ValueError(f"invalid scenario {text!r}, step {position}: {exc}") from None
    return tuple(steps)


def split_model(model: str) -> tuple[str, str | None]:
    """Split `label~steps` into `(label, steps)`; `steps` is None without `~`.

    Args:
        model: the requested model name.

    Returns:
        The label and the raw steps text (unparsed), split at the first `~`.
    """
    label, sep, steps = model.partition(SEPARATOR)
    return label, (steps if sep else None)


def scenario_for(model: str, header: str | None) -> tuple[Step, ...]:
    """The steps a request follows: the header's if present, else the model's.

    Args:
        model: the requested model name (`label` or `label~steps`).
        header: the `x-sim-scenario` header value, or None when absent.

    Returns:
        The parsed steps; `(DEFAULT_STEP,)` for a plain model name.

    Raises:
        ValueError: the chosen scenario text is invalid.
    """
    if header is not None:
        return parse_scenario(header)
    _, steps = split_model(model)
    if steps is None:
        return (DEFAULT_STEP,)
    return parse_scenario(steps)
