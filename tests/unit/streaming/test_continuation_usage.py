"""The usage a client is told after a stream continuation (`turnout.streaming.continuation.whole_answer_usage`)."""

from __future__ import annotations

import pytest

from turnout.adapters.base import Usage
from turnout.streaming.continuation import whole_answer_usage


@pytest.mark.parametrize(
    ("own", "delivered", "expected"),
    [
        (Usage(input_tokens=65, output_tokens=20), 40, Usage(input_tokens=25, output_tokens=60)),
        (Usage(input_tokens=10, output_tokens=3), 0, Usage(input_tokens=10, output_tokens=3)),
        (Usage(input_tokens=5, output_tokens=3), 9, Usage(input_tokens=0, output_tokens=8)),
        (Usage(input_tokens=5, output_tokens=3), -2, Usage(input_tokens=5, output_tokens=3)),
    ],
    ids=["prefill-moves-to-completion", "nothing-delivered", "never-negative", "negative-count-ignored"],
)
def test_whole_answer_usage_moves_the_prefill_back_to_the_completion(
    own: Usage, delivered: int, expected: Usage
) -> None:
    whole = whole_answer_usage(own, delivered)
    assert whole == expected
    assert whole.input_tokens + whole.output_tokens == own.input_tokens + own.output_tokens
