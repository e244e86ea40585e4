"""OpenAI Embeddings wire format: request fields, deterministic vectors, the answer.

Owns: reading `POST /v1/embeddings` (`model`, `input` as a string, a list of
strings, a token array or a list of token arrays, `dimensions`,
`encoding_format`, `user`) with OpenAI's 400 bodies naming the parameter,
and building the `{"object": "list", "data": [...], "model", "usage"}`
answer.
Must not import: aiohttp or any I/O; pure functions of their arguments.
Source: https://platform.openai.com/docs/api-reference/embeddings/create.

Vectors are a pure function of the model's label (the model name before
`~`, so a fault scenario does not change them) and the input item: a
`random.Random` seeded with the BLAKE2b digest of both draws Gaussian
components, and the vector is scaled to unit length. `dimensions` keeps the
first `dimensions` components of the model's full vector and scales them to
unit length again (as OpenAI shortens its text-embedding-3 vectors). With
`encoding_format: base64` each vector is its little-endian float32 bytes,
base64-encoded. Usage counts whitespace-separated words of a string (at
least 1) and the length of a token array.
"""

from __future__ import annotations

import base64
import hashlib
import math
import random
import struct
from dataclasses import dataclass
from typing import Any

from turnout_sim.openai_errors import envelope
from turnout_sim.openai_wire import RequestError
from turnout_sim.scenarios import split_model

DEFAULT_DIMENSIONS = 1536
"""Vector length of a model without a known length of its own."""
LARGE_DIMENSIONS = 3072
"""Vector length of a model whose name says `large` (text-embedding-3-large)."""
MAX_INPUTS = 2048
"""Most input items one request may carry, as OpenAI documents."""
ENCODINGS = ("float", "base64")

Item = str | tuple[int, ...]
"""One input item: a string or a token array."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingsRequest:
    """The honoured fields of an embeddings request.

    Attributes:
        model: the requested model name, echoed in the answer.
        items: the input items, in order (at least one).
        dimensions: the vector length answered (the model's, or `dimensions`).
        encoding_format: `float` or `base64`.
        prompt_tokens: the input's size in tokens (see the module doc).
    """

    model: str
    items: tuple[Item, ...]
    dimensions: int
    encoding_format: str
    prompt_tokens: int


def _invalid(message: str, param: str, code: str | None = None) -> RequestError:
    return RequestError(envelope(message, "invalid_request_error", code, param))


def model_dimensions(model: str) -> int:
    """The full vector length of `model`: 3072 when its label says `large`, else 1536."""
    return LARGE_DIMENSIONS if "large" in split_model(model)[0] else DEFAULT_DIMENSIONS


def _token_array(value: list[Any]) -> tuple[int, ...] | None:
    if value and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value):
        return tuple(value)
    return None


def _items(raw: object) -> tuple[Item, ...]:
    """The input items of `input` (see the module doc).

    Raises:
        RequestError: missing, empty, an empty string or token array, a mixed
            or otherwise unusable list, or more than `MAX_INPUTS` items.
    """
    if raw is None:
        raise _invalid("Missing required parameter: 'input'.", "input", "missing_required_parameter")
    if isinstance(raw, str):
        if not raw:
            raise _invalid("'$.input' is invalid: it must not be an empty string.", "input")
        return (raw,)
    if not isinstance(raw, list) or not raw:
        raise _invalid("'$.input' is invalid: expected a non-empty string or array.", "input")
    tokens = _token_array(raw)
    if tokens is not None:
        return (tokens,)
    if len(raw) > MAX_INPUTS:
        raise _invalid(f"'$.input' is invalid: at most {MAX_INPUTS} inputs are allowed, got {len(raw)}.", "input")
    items: list[Item] = []
    for index, value in enumerate(raw):
        if isinstance(value, str) and value:
            items.append(value)
        elif isinstance(value, list) and (array := _token_array(value)) is not None:
            items.append(array)
        else:
            raise _invalid(
                f"'$.input[{index}]' is invalid: expected a non-empty string or a non-empty array of tokens.",
                "input",
            )
    return tuple(items)


def parse_request(body: object) -> EmbeddingsRequest:
    """Read the honoured fields of a decoded embeddings request body.

    Raises:
        RequestError: OpenAI's 400 body naming the parameter: no model, a bad
            `input` (see `_items`), `encoding_format` other than float /
            base64, `dimensions` not an integer in 1..the model's length,
            `user` not a string.
    """
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object.", "body")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("you must provide a model parameter", "model", "missing_required_parameter")
    items = _items(body.get("input"))
    encoding = body.get("encoding_format", "float")
    if encoding not in ENCODINGS:
        raise _invalid(
            f"Invalid value for 'encoding_format': expected 'float' or 'base64', got {encoding!r}.",
            "encoding_format",
            "invalid_value",
        )
    full = model_dimensions(model)
    dimensions = body.get("dimensions")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int)):
        raise _invalid("Invalid type for 'dimensions': expected an integer.", "dimensions", "invalid_type")
    if dimensions is not None and not 1 <= dimensions <= full:
        raise _invalid(
            f"Invalid value for 'dimensions': expected an integer between 1 and {full}, got {dimensions}.",
            "dimensions",
            "invalid_value",
        )
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise _invalid("Invalid type for 'user': expected a string.", "user", "invalid_type")
    return EmbeddingsRequest(
        model=model,
        items=items,
        dimensions=full if dimensions is None else dimensions,
        encoding_format=str(encoding),
        prompt_tokens=sum(max(1, len(i.split())) if isinstance(i, str) else len(i) for i in items),
    )


def vector(model: str, item: Item, dimensions: int) -> list[float]:
    """The unit-length embedding of `item` by `model`, `dimensions` long.

    Args:
        model: the model name (only its label, before `~`, counts).
        item: a string or a token array.
        dimensions: 1..the model's full length; the full vector's first
            `dimensions` components, scaled to unit length.
    """
    label = split_model(model)[0]
    text = item if isinstance(item, str) else "tokens:" + ",".join(map(str, item))
    digest = hashlib.blake2b(f"{label}\x1f{text}".encode(), digest_size=16).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    values = [rng.gauss(0.0, 1.0) for _ in range(model_dimensions(model))][:dimensions]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def encode(values: list[float], encoding_format: str) -> list[float] | str:
    """`values` as the wire carries them: the floats, or base64 of their
    little-endian float32 bytes."""
    if encoding_format == "base64":
        return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode("ascii")
    return values


def answer(req: EmbeddingsRequest) -> dict[str, Any]:
    """The embeddings answer: one `embedding` object per item (index 0..n-1)."""
    return {
        "object": "list",
        "data": [
            {
                "object": "embedding",
                "index": index,
                "embedding": encode(vector(req.model, item, req.dimensions), req.encoding_format),
            }
            for index, item in enumerate(req.items)
        ],
        "model": req.model,
        "usage": {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens},
    }
