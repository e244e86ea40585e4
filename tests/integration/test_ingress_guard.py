"""`turnout ingress` runs with the HTTP guards (`turnout_ingress.guard.http`): a real ingress process."""

from __future__ import annotations

import re
import socket
from urllib.parse import urlparse

import pytest

from support.gateway import KEY, Gateway

pytestmark = pytest.mark.integration


def _exchange(base_url: str, data: bytes) -> bytes:
    url = urlparse(base_url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as conn:
        try:
            conn.sendall(data)
        except ConnectionError:
            pass
        try:
            return conn.recv(4096)
        except ConnectionError:
            return b"reset"


def test_ingress_process_answers_431_to_headers_over_64_kib(gateway: Gateway) -> None:
    answer = _exchange(
        gateway.base_url, b"GET /health/liveness HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 70_000 + b"\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
    assert b"headers_too_large" in answer


def test_ingress_process_serves_headers_under_the_limit(gateway: Gateway) -> None:
    answer = _exchange(
        gateway.base_url,
        b"GET /health/liveness HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 30_000 + b"\r\nconnection: close\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]


def _one_answer(conn: socket.socket) -> bytes:
    """The head of one answer with a `content-length`, read with its content off `conn`."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(4096) or b"<closed>"
    head, _, content = data.partition(b"\r\n\r\n")
    length = re.search(rb"\r\ncontent-length: (\d+)", head, re.IGNORECASE)
    assert length is not None, head
    while len(content) < int(length[1]):
        content += conn.recv(4096) or b"<closed>"
    return head


@pytest.mark.parametrize(
    ("auth", "status"),
    [(f"authorization: Bearer {KEY}\r\n".encode(), b"413"), (b"", b"401")],
    ids=["declared-too-large", "no-key"],
)
def test_ingress_process_closes_the_connection_it_answered_before_the_body_arrived(
    gateway: Gateway, auth: bytes, status: bytes
) -> None:
    url = urlparse(gateway.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=5) as conn:  # 5 s: a guard, the body's is 30
        conn.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n%scontent-type: application/json\r\n"
            b"content-length: 5000000000\r\n\r\n{}" % auth
        )
        head = _one_answer(conn)
        assert head.startswith(b"HTTP/1.1 %s " % status) and b"\r\nconnection: close" in head, head
        try:
            conn.sendall(b"GET /health/liveness HTTP/1.1\r\nhost: x\r\n\r\n")  # not the rest of the body
            assert conn.recv(4096) == b""  # closed: no answer and no wait
        except ConnectionError:
            pass  # closed before the second request reached it
