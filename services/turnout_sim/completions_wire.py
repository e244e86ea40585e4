"""OpenAI legacy text completions wire format: request fields, answer, chunks.

Owns: reading `POST /v1/completions` (`model`, `prompt` as a string, an
array of strings, a token array or an array of token arrays, `max_tokens`,
`n`, `stream`, `stream_options.include_usage`, `echo`, `suffix`,
`logprobs`, `temperature`, `stop`, `user`; other fields ignored) with
OpenAI's 400 bodies naming the parameter, and building the `text_completion`
object and the chunks of its stream.
Must not import: aiohttp or any I/O; pure functions of their arguments.
Source: https://platform.openai.com/docs/api-reference/completions/create
(and .../completions/object).

The answer text is chat's (`openai_wire`): choice i says `tok0 tok1 ...`
(i = 0) or `c<i>tok0 c<i>tok1 ...`, `max_tokens` tokens long (default 16,
which is then the limit: a longer `len<N>` answer is cut, `finish_reason:
"length"`; `max_tokens: 0` produces nothing, `length`). Each prompt gets `n`
choices, indexed `prompt * n + k`. A token array's text is its ids as words
(`[7, 9]` is `t7 t9`); a prompt's tokens are its words (a string's
whitespace kept with the word after it), so `prompt_tokens` counts the
words of each prompt and of `suffix`. `echo` prepends the choice's prompt
text; `suffix` is input only. `stop`, `temperature` and `user` are checked
and change nothing.

Logprobs (`logprobs: k`, 0..5): per token (the prompt's too with `echo`,
the first of them `null` as OpenAI sends it) the logprob of
`chat_answer.token_logprob`, `top_logprobs` the token itself then `alt1`,
`alt2`, ... one lower each (max(k, 1) entries), and `text_offset` each
token's character offset in prompt + answer (the prompt's length is counted
without `echo` too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from turnout_sim import chat_answer
from turnout_sim import openai_wire as wire
from turnout_sim.openai_errors import envelope
from turnout_sim.openai_wire import ChatRequest, RequestError

DEFAULT_MAX_TOKENS = 16
"""`max_tokens` when the request gives none, as OpenAI documents."""
MAX_LOGPROBS = 5
"""Largest `logprobs` accepted, as OpenAI documents."""
MAX_STOP = 4
"""Most stop sequences accepted, as OpenAI documents."""

_PROMPT_TYPE = "expected a string, an array of strings, an array of tokens or an array of token arrays"
_WORD = re.compile(r"\s*\S+")


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletionsRequest:
    """The honoured fields of a text completion request.

    Attributes:
        model: the requested model name, echoed.
        stream: SSE wanted.
        chat: the answer's text engine: `chat.n` = prompts x `n` choices,
            `completion_tokens`, `limit` (`max_tokens`), `cut`,
            `include_usage`, `prompt_tokens` (every prompt and the suffix).
        prompts: each prompt's text (a token array's as `t<id>` words).
        n: choices per prompt (1..`wire.MAX_N`).
        echo: the prompt text prepended to each choice's text.
        logprobs: top alternatives per token (0..`MAX_LOGPROBS`), or None
            for `logprobs: null` answers.
    """

    model: str
    stream: bool
    chat: ChatRequest
    prompts: tuple[str, ...]
    n: int = 1
    echo: bool = False
    logprobs: int | None = None

    @property
    def prompt_tokens(self) -> int:
        """The input's size in tokens (quoted by the `ctx` error)."""
        return self.chat.prompt_tokens


def _invalid(message: str, param: str, code: str | None = "invalid_type") -> RequestError:
    return RequestError(envelope(message, "invalid_request_error", code, param))


def _token_text(value: object) -> str | None:
    """A non-empty token array's text (`t<id>` words), else None."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value):
        return None
    return " ".join(f"t{t}" for t in value)


def prompt_texts(raw: object) -> tuple[str, ...]:
    """The prompts of `prompt`, as text (see the module doc).

    Raises:
        RequestError: missing (`missing_required_parameter`), or not one of
            the four forms (an empty array, a mixed array, an empty or
            non-integer token array): 400 naming `prompt`.
    """
    if raw is None:
        raise _invalid("Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter")
    if isinstance(raw, str):
        return (raw,)
    single = _token_text(raw)
    if single is not None:
        return (single,)
    if not isinstance(raw, list) or not raw:
        raise _invalid(f"Invalid type for 'prompt': {_PROMPT_TYPE}.", "prompt")
    if all(isinstance(item, str) for item in raw):
        return tuple(raw)
    arrays = [_token_text(item) for item in raw]
    if all(text is not None for text in arrays):
        return tuple(text for text in arrays if text is not None)
    raise _invalid(f"Invalid type for 'prompt': {_PROMPT_TYPE}.", "prompt")


def prompt_tokens(text: str) -> list[str]:
    """A prompt's tokens: its words, each with the whitespace before it, the
    trailing whitespace kept on the last; joined they give `text` back."""
    pieces = _WORD.findall(text)
    rest = text[len("".join(pieces)) :]
    if rest:
        pieces = [*pieces[:-1], pieces[-1] + rest] if pieces else [rest]
    return pieces


def _check_extras(body: dict[str, Any]) -> None:
    """`suffix`, `user`, `stop` and `temperature` have OpenAI's types."""
    for name in ("suffix", "user"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise _invalid(f"Invalid type for '{name}': expected a string.", name)
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop
    if stop is not None and not (
        isinstance(stops, list) and len(stops) <= MAX_STOP and all(isinstance(s, str) for s in stops)
    ):
        raise _invalid(f"Invalid type for 'stop': expected a string or an array of up to {MAX_STOP} strings.", "stop")
    temperature = body.get("temperature")
    if temperature is None:
        return
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise _invalid("Invalid type for 'temperature': expected a number.", "temperature")
    if not 0 <= temperature <= 2:
        raise _invalid(
            f"Invalid 'temperature': expected a value between 0 and 2, but got {temperature} instead.",
            "temperature",
            "invalid_value",
        )


def parse_request(body: object) -> CompletionsRequest:
    """Read the honoured fields of a decoded text completion request body.

    Raises:
        RequestError: OpenAI's 400 body naming the parameter: no `model`, a
            bad `prompt` (see `prompt_texts`), `max_tokens` not an integer
            >= 0, `n` outside 1..`wire.MAX_N`, `logprobs` outside
            0..`MAX_LOGPROBS`, or a bad `suffix`, `stop`, `temperature` or
            `user`.
    """
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object.", "body")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("you must provide a model parameter", "model", "missing_required_parameter")
    prompts = prompt_texts(body.get("prompt"))
    given = wire.int_param(body, "max_tokens", minimum=0)
    limit = DEFAULT_MAX_TOKENS if given is None else given
    n = wire.int_param(body, "n", wire.MAX_N) or 1
    logprobs = wire.int_param(body, "logprobs", MAX_LOGPROBS, minimum=0)
    _check_extras(body)
    suffix = body.get("suffix")
    options = body.get("stream_options")
    chat = ChatRequest(
        model=model,
        stream=body.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        completion_tokens=min(limit, wire.MAX_TOKENS_CAP),
        prompt_tokens=sum(len(text.split()) for text in prompts) + len(suffix.split() if suffix else []),
        n=n * len(prompts),
        limit=limit,
        cut=limit == 0,
    )
    return CompletionsRequest(
        model=model,
        stream=chat.stream,
        chat=chat,
        prompts=prompts,
        n=n,
        echo=body.get("echo") is True,
        logprobs=logprobs,
    )


def with_answer_length(req: CompletionsRequest, answer_tokens: int) -> CompletionsRequest:
    """`req` answered by a model whose full answer is `answer_tokens` long
    (`len<N>`), cut by `max_tokens` (or its default) when that is smaller."""
    return replace(req, chat=wire.with_answer_length(req.chat, answer_tokens))


def prompt_of(req: CompletionsRequest, choice: int) -> str:
    """The prompt text choice `choice` answers."""
    return req.prompts[choice // req.n]


def logprobs_of(
    req: CompletionsRequest, pieces: list[str], *, first_index: int, offset: int, prompt: bool = False
) -> dict[str, Any] | None:
    """The `logprobs` object covering `pieces`, or None when not asked.

    Args:
        req: the request (its `logprobs`).
        pieces: consecutive tokens.
        first_index: the 0-based position of `pieces[0]` among its kind
            (prompt or answer tokens).
        offset: the character offset of `pieces[0]` in prompt + answer.
        prompt: the pieces are the echoed prompt's (the first has no logprob).
    """
    if req.logprobs is None:
        return None
    token_logprobs: list[float | None] = []
    top: list[dict[str, float] | None] = []
    offsets: list[int] = []
    for position, piece in enumerate(pieces, start=first_index):
        offsets.append(offset)
        offset += len(piece)
        if prompt and position == 0:
            token_logprobs.append(None)
            top.append(None)
            continue
        logprob = chat_answer.token_logprob(position)
        alternatives = {f"alt{k}": logprob - k for k in range(1, max(req.logprobs, 1))}
        token_logprobs.append(logprob)
        top.append({piece: logprob} | alternatives)
    return {"tokens": list(pieces), "token_logprobs": token_logprobs, "top_logprobs": top, "text_offset": offsets}


def _merge(first: dict[str, Any] | None, second: dict[str, Any] | None) -> dict[str, Any] | None:
    if first is None or second is None:
        return second if first is None else first
    return {key: first[key] + second[key] for key in first}


def choice_object(req: CompletionsRequest, choice: int) -> dict[str, Any]:
    """Choice `choice` of the non-streamed answer: `text` (the prompt first
    under `echo`), `index`, `logprobs`, `finish_reason`."""
    prompt, pieces = prompt_of(req, choice), wire.answer_pieces(req.chat, choice)
    head = prompt_tokens(prompt) if req.echo else []
    logprobs = _merge(
        logprobs_of(req, head, first_index=0, offset=0, prompt=True) if req.echo else None,
        logprobs_of(req, pieces, first_index=0, offset=len(prompt)),
    )
    text = (prompt if req.echo else "") + "".join(pieces)
    return {"text": text, "index": choice, "logprobs": logprobs, "finish_reason": wire.finish_reason(req.chat)}


def completion(req: CompletionsRequest, *, completion_id: str, created_s: int) -> dict[str, Any]:
    """The full `text_completion` object (prompts x `n` choices, `usage`).

    Args:
        req: the request being answered.
        completion_id: `cmpl-...` id.
        created_s: creation time, integer epoch seconds.
    """
    return {
        "id": completion_id,
        "object": "text_completion",
        "created": created_s,
        "model": req.model,
        "choices": [choice_object(req, choice) for choice in range(req.chat.n)],
        "usage": wire.usage(req.chat),
    }


def stream_chunks(req: CompletionsRequest, *, completion_id: str, created_s: int) -> list[tuple[dict[str, Any], bool]]:
    """Every chunk of the streamed answer, in order, each with whether it
    carries answer text (counted by `cut<N>` and the like): under `echo` one
    chunk per choice with its prompt, the answer pieces round-robin
    (`wire.stream_pieces`), one finish chunk per choice (`text: ""`), and
    the usage chunk (`choices: []`) when `stream_options.include_usage`."""

    def build(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict[str, Any]:
        obj = {
            "id": completion_id,
            "object": "text_completion",
            "created": created_s,
            "model": req.model,
            "choices": choices,
        }
        return obj | {"usage": usage} if req.chat.include_usage else obj

    def piece(choice: int, text: str, logprobs: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
        return build([{"text": text, "index": choice, "logprobs": logprobs, "finish_reason": finish}])

    out: list[tuple[dict[str, Any], bool]] = []
    offsets = [len(prompt_of(req, c)) for c in range(req.chat.n)]
    if req.echo:
        for c in range(req.chat.n):
            head = prompt_tokens(prompt_of(req, c))
            logprobs = logprobs_of(req, head, first_index=0, offset=0, prompt=True)
            out.append((piece(c, prompt_of(req, c), logprobs), False))
    positions = [0] * req.chat.n
    for c, text in wire.stream_pieces(req.chat):
        logprobs = logprobs_of(req, [text], first_index=positions[c], offset=offsets[c])
        positions[c] += 1
        offsets[c] += len(text)
        out.append((piece(c, text, logprobs), True))
    finish = wire.finish_reason(req.chat)
    out += [(piece(c, "", None, finish), False) for c in range(req.chat.n)]
    if req.chat.include_usage:
        out.append((build([], wire.usage(req.chat)), False))
    return out
