"""The job envelope: what arq stores and reads back for a queued chat job."""

from __future__ import annotations

from arq.jobs import serialize_job
from arq.utils import args_to_string

from turnout.state.queue import JobBytes, job_deserializer, job_serializer

SECRET_PROMPT = b'{"messages":[{"role":"user","content":"my card is 4111 1111 1111 1111"}]}'


def test_the_payload_comes_back_whole_and_repr_names_only_its_length() -> None:
    stored = serialize_job("chat_completion", (SECRET_PROMPT,), {}, 1, 1_700_000_000_000, serializer=job_serializer)
    envelope = job_deserializer(stored)
    (payload,) = envelope["a"]
    assert isinstance(payload, JobBytes) and payload == SECRET_PROMPT and bytes(payload) == SECRET_PROMPT
    assert envelope["f"] == "chat_completion" and envelope["t"] == 1
    line = args_to_string(envelope["a"], envelope["k"])  # what arq formats for its start log line
    assert line == f"<job payload: {len(SECRET_PROMPT)} bytes>"
    assert b"4111" not in line.encode()


def test_arguments_that_are_not_bytes_are_left_alone() -> None:
    stored = serialize_job("other", (1, "two", [3]), {"k": b"v"}, 2, 0, serializer=job_serializer)
    envelope = job_deserializer(stored)
    assert envelope["a"] == [1, "two", [3]] and not any(isinstance(a, JobBytes) for a in envelope["a"])
    assert envelope["k"] == {"k": b"v"}
