"""The text inputs of OpenAI's embeddings and legacy completions requests, checked alike.

Owns: `check_text_input`, for a field (`input` of an embeddings request, `prompt` of a
completions request) that takes one of four forms: a string, an array of strings, an
array of token ids, or an array of token-id arrays.
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.

Source: https://platform.openai.com/docs/api-reference/embeddings/create and
/completions/create (the four forms; at most 2048 items in an embeddings array).
"""

from __future__ import annotations

from typing import Final

from turnout_ingress.serving.validation import invalid

MAX_ITEMS: Final = 2048
"""Most inputs in one request, an array of strings or of token-id arrays (OpenAI reference: "any
array must be 2048 dimensions or less"); one token-id array is one input, of any length."""
TOKEN_HIGH: Final = 2**31 - 1
"""The largest token id accepted (a 32-bit signed integer)."""


def _is_tokens(value: object) -> bool:
    """A non-empty array of token ids (integers from 0 to `TOKEN_HIGH`, never booleans)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= TOKEN_HIGH for t in value)
    )


def check_text_input(value: object, field: str, *, empty: bool) -> None:
    """`value`, the request's `field`, in one of its four forms (module doc).

    Args:
        value: the field's decoded JSON (None: absent).
        field: its name, for messages and `param` (`input`, `prompt`).
        empty: whether an empty string is allowed (a completions prompt; never an embeddings input).

    Raises:
        RequestRejected: 400 naming `field` or the item at fault (`input[3]`).
    """
    forms = "a string, an array of strings, an array of token ids or an array of token-id arrays"
    if value is None:
        raise invalid(f"`{field}` is required: {forms}.", field)
    if isinstance(value, str):
        if not value and not empty:
            raise invalid(f"`{field}` cannot be an empty string.", field)
        return
    if not isinstance(value, list) or not value:
        raise invalid(f"`{field}` must be {forms} (a non-empty one).", field)
    if _is_tokens(value):  # one input of token ids: its length is the model's to judge
        return
    if len(value) > MAX_ITEMS:
        raise invalid(f"`{field}` may hold at most {MAX_ITEMS} inputs (got {len(value)}).", field)
    first = value[0]
    if isinstance(first, int) and not isinstance(first, bool):  # one input of token ids with a bad item
        i = next(i for i, t in enumerate(value) if not _is_tokens([t]))
        raise invalid(
            f"`{field}[{i}]` must be a token id (an integer from 0 to {TOKEN_HIGH}), like every item of a token array.",
            f"{field}[{i}]",
        )
    strings = isinstance(first, str)
    for i, item in enumerate(value):
        if strings:
            if not isinstance(item, str) or (not item and not empty):
                what = "a string" if empty else "a non-empty string"
                raise invalid(f"`{field}[{i}]` must be {what}, like every item of the array.", f"{field}[{i}]")
        elif not _is_tokens(item):
            raise invalid(
                f"`{field}[{i}]` must be a non-empty array of token ids (integers from 0 to {TOKEN_HIGH}), "
                "like every item of the array.",
                f"{field}[{i}]",
            )
