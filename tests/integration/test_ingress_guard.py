"""`turnout ingress` runs with the HTTP guards (`turnout_ingress.http_guard`): a real ingress process."""

from __future__ import annotations

import socket
from urllib.parse import urlparse

import pytest

from support.gateway import Gateway

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
