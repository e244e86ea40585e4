"""`turnout logs export` and `turnout logs refusals`: the request each sends (`--org` and the filters passed
through, the key as a bearer token)."""

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


def test_an_output_file_that_cannot_be_written_is_one_line_not_a_traceback(
    sent: list[dict[str, Any]], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-dir" / "out.jsonl"
    args = build_parser().parse_args(
        ["logs", "export", "--url", "http://gw", "--key", "op-key-0001", "-o", str(missing)]
    )
    assert args.func(args) == 1
    assert capsys.readouterr().err == f"turnout logs export: cannot write {missing}: No such file or directory\n"


def test_an_error_answer_leaves_no_empty_output_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    @contextmanager
    def stream(method: str, url: str, **kwargs: Any) -> Iterator[httpx.Response]:
        yield httpx.Response(404, json={"error": {"message": "No such org `nope`"}})

    monkeypatch.setattr(httpx, "stream", stream)
    assert _run(["--key", "op-key-0001", "--org", "nope"], tmp_path) == 1
    assert not (tmp_path / "out").exists()
    assert "404: No such org `nope`" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--url", "http://127.0.0.1:abc"],
            "argument --url: not a URL (Invalid port: 'abc'); got 'http://127.0.0.1:abc'",
        ),
        (["--url", "ftp://gw"], "argument --url: an ingress URL starts with http:// or https://; got 'ftp://gw'"),
        (["--url", "http://"], "argument --url: an ingress URL names a host"),
        (["--url", "http://gw:99999"], "argument --url: a port is a whole number from 1 to 65535"),
        (["--key", "opé-secret"], "argument --key: a key is visible ASCII without spaces; character 3 of 10 is not"),
        (["--key", "op key"], "argument --key: a key is visible ASCII without spaces; character 3 of 6 is not"),
        (["--timeout", "-1"], "argument --timeout: a number of seconds above 0; got '-1'"),
        (["--timeout", "nan"], "argument --timeout: a number of seconds above 0; got 'nan'"),
    ],
)
@pytest.mark.parametrize("command", [["logs", "export"], ["logs", "refusals"], ["audit", "export"], ["admin"]])
def test_client_options_the_http_client_would_crash_on_are_refused_naming_the_option(
    command: list[str], argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if command == ["admin"] and argv[0] == "--timeout":
        return  # `turnout admin` has no --timeout
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args([*command, *argv, *(["orgs", "list"] if command == ["admin"] else [])])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert error in err and "secret" not in err.split("error:")[-1]


def test_refusals_pass_the_org_and_the_filters_to_the_route(sent: list[dict[str, Any]], tmp_path: Any) -> None:
    argv = ["logs", "refusals", "--url", "http://gw", "--key", "op-key-0001", "-o", str(tmp_path / "out")]
    args = build_parser().parse_args([*argv, "--org", "-", "--status", "401", "--route", "other", "--since", "100"])
    assert args.func(args) == 0
    assert sent[0]["url"] == "http://gw/admin/v1/refusals"
    assert sent[0]["params"] == {"org": "-", "status": "401", "route": "other", "since": "100"}
    assert sent[0]["headers"] == {"authorization": "Bearer op-key-0001"}
    args = build_parser().parse_args([*argv[:4], "--key", "tk-admin-0001", "-o", str(tmp_path / "out")])
    assert args.func(args) == 0 and sent[1]["params"] == {}  # an admin key: its own org, every row up to 100
