"""`turnout admin ...`: each command maps to one admin API call; secrets never come from argv."""

from __future__ import annotations

from typing import Any

import pytest

from turnout_cli.admin import _request
from turnout_cli.main import build_parser

SET_PROVIDER = ["catalog", "set-provider", "a", "--kind", "openai", "--base-url", "https://a.example/v1"]
SET_PROVIDER_WITH_KEY = ["admin", *SET_PROVIDER, "--with-key"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["orgs", "list"], ("GET", "/orgs", None)),
        (["spend", "show", "acme"], ("GET", "/orgs/acme/spend?period=month", None)),
        (
            ["spend", "show", "acme", "--period", "day", "--at", "2026-12-01"],
            ("GET", "/orgs/acme/spend?period=day&at=2026-12-01", None),
        ),
        (
            ["orgs", "create", "acme", "--settings", '{"key_mode": "own_only"}'],
            ("POST", "/orgs", {"id": "acme", "settings": {"key_mode": "own_only"}}),
        ),
        (["orgs", "delete", "acme"], ("DELETE", "/orgs/acme", None)),
        (["squads", "create", "acme", "research"], ("POST", "/orgs/acme/squads", {"name": "research"})),
        (["squads", "delete", "acme", "research"], ("DELETE", "/orgs/acme/squads/research", None)),
        (
            ["keys", "create", "acme", "ci", "--squad", "research", "--ttl-s", "60"],
            ("POST", "/orgs/acme/keys", {"name": "ci", "admin": False, "squad": "research", "ttl_s": 60.0}),
        ),
        (
            ["keys", "create", "acme", "boss", "--admin"],
            ("POST", "/orgs/acme/keys", {"name": "boss", "admin": True, "squad": None}),
        ),
        (
            ["keys", "update", "acme", "ci", "--no-squad", "--no-admin"],
            ("PATCH", "/orgs/acme/keys/ci", {"squad": None, "admin": False}),
        ),
        (["keys", "revoke", "acme", "ci"], ("POST", "/orgs/acme/keys/ci/revoke", None)),
        (["keys", "effective", "acme", "ci"], ("GET", "/orgs/acme/keys/ci/effective", None)),
        (["settings", "get", "acme", "--squad", "research"], ("GET", "/orgs/acme/squads/research/settings", None)),
        (
            ["settings", "set", "acme", '{"reroutes": null}', "--key", "ci"],
            ("PATCH", "/orgs/acme/keys/ci/settings", {"reroutes": None}),
        ),
        (["settings", "replace", "acme", '{"fallbacks": ["m"]}'], ("PUT", "/orgs/acme/settings", {"fallbacks": ["m"]})),
        (["provider-keys", "delete", "acme", "openai"], ("DELETE", "/orgs/acme/provider-keys/openai", None)),
        (
            ["endpoints", "set", "acme", "vllm", "--base-url", "https://v.example/v1"],
            ("PUT", "/orgs/acme/custom-endpoints/vllm", {"base_url": "https://v.example/v1"}),
        ),
        (["rotate-secrets"], ("POST", "/secrets/rotate", None)),
        (["catalog", "get"], ("GET", "/catalog", None)),
        (
            ["catalog", "set-model", "m", '{"offers": [{"provider": "a", "model": "x"}]}'],
            ("PUT", "/catalog/models/m", {"offers": [{"provider": "a", "model": "x"}]}),
        ),
        (["catalog", "delete-model", "m"], ("DELETE", "/catalog/models/m", None)),
        (
            ["catalog", "delete-model", "meta-llama/llama 3?"],
            ("DELETE", "/catalog/models/meta-llama%2Fllama%203%3F", None),
        ),
        (
            [*SET_PROVIDER, "--key-env", "A_KEY"],
            (
                "PUT",
                "/catalog/providers/a",
                {"kind": "openai", "base_url": "https://a.example/v1", "api_key_env": "A_KEY"},
            ),
        ),
        (
            ["catalog", "set-provider", "a", "--kind", "openai", "--base-url", "https://a.example/v1"],
            ("PUT", "/catalog/providers/a", {"kind": "openai", "base_url": "https://a.example/v1"}),
        ),
        (
            ["catalog", "set-provider", "a", "--kind", "openai", "--base-url", "https://a.example/v1", "--no-key"],
            ("PUT", "/catalog/providers/a", {"kind": "openai", "base_url": "https://a.example/v1", "api_key": None}),
        ),
        (["catalog", "delete-provider", "a"], ("DELETE", "/catalog/providers/a", None)),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_admin_command_maps_to_one_api_call(argv: list[str], expected: tuple[str, str, Any]) -> None:
    args = build_parser().parse_args(["admin", "--key", "k", *argv])
    assert _request(args) == expected


def test_provider_key_secret_comes_from_the_environment_not_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_OPENAI", "sk-from-env-0001")
    args = build_parser().parse_args(
        ["admin", "provider-keys", "set", "acme", "openai", "--api-key-env", "ACME_OPENAI"]
    )
    assert _request(args) == ("PUT", "/orgs/acme/provider-keys/openai", {"api_key": "sk-from-env-0001"})
    with pytest.raises(SystemExit):
        build_parser().parse_args(["admin", "provider-keys", "set", "acme", "openai", "--api-key", "sk-x"])


def test_a_catalog_provider_key_comes_from_stdin_never_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("sk-from-stdin-0001\n"))
    args = build_parser().parse_args(SET_PROVIDER_WITH_KEY)
    assert _request(args) == (
        "PUT",
        "/catalog/providers/a",
        {"kind": "openai", "base_url": "https://a.example/v1", "api_key": "sk-from-stdin-0001"},
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args([*SET_PROVIDER_WITH_KEY[:-1], "--api-key", "sk-x"])


@pytest.mark.parametrize(("stdin", "lines"), [("sk-a\nsk-b\n", 2), ("\n\n", 0)])
def test_a_piped_key_must_be_one_line_never_cut_to_the_first(
    monkeypatch: pytest.MonkeyPatch, stdin: str, lines: int
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    args = build_parser().parse_args(SET_PROVIDER_WITH_KEY)
    with pytest.raises(SystemExit) as info:
        _request(args)
    assert str(info.value) == f"turnout admin: standard input must hold the key alone on one line; it holds {lines}"
    assert "sk-a" not in str(info.value)
