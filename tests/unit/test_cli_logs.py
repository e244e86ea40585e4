"""`turnout logs export`: the request it sends (`--org` passed through, the key as a bearer token)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from turnout_cli.main import build_parser


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every `httpx.stream` call of the command, answered 200 with one row."""
    calls: list[dict[str, Any]] = []

    @contextmanager
    def stream(method: str, url: str, **kwargs: Any) -> Iterator[httpx.Response]:
        calls.append({"method": method, "url": url, **kwargs})
        yield httpx.Response(200, content=b'{"org": "demo"}\n')

    monkeypatch.setattr(httpx, "stream", stream)
    return calls


def _run(argv: list[str], tmp_path: Any) -> int:
    args = build_parser().parse_args(["logs", "export", "--url", "http://gw", "-o", str(tmp_path / "out"), *argv])
    code: int = args.func(args)
    return code


def test_org_is_passed_to_the_route(sent: list[dict[str, Any]], tmp_path: Any) -> None:
    assert _run(["--key", "op-key-0001", "--org", "demo", "--format", "csv"], tmp_path) == 0
    assert sent[0]["url"] == "http://gw/admin/v1/logs/export"
    assert sent[0]["params"] == {"format": "csv", "org": "demo"}
    assert sent[0]["headers"] == {"authorization": "Bearer op-key-0001"}
    assert (tmp_path / "out").read_bytes() == b'{"org": "demo"}\n'


def test_without_org_the_admin_keys_org_is_meant(sent: list[dict[str, Any]], tmp_path: Any) -> None:
    assert _run(["--key", "tk-admin-0001"], tmp_path) == 0
    assert sent[0]["params"] == {"format": "jsonl"}


def test_the_key_defaults_to_the_admin_key_then_the_operator_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TURNOUT_ADMIN_KEY", raising=False)
    monkeypatch.setenv("TURNOUT_OPERATOR_KEY", "op-key-0001")
    assert build_parser().parse_args(["logs", "export"]).key == "op-key-0001"
    monkeypatch.setenv("TURNOUT_ADMIN_KEY", "tk-admin-0001")
    assert build_parser().parse_args(["logs", "export"]).key == "tk-admin-0001"
