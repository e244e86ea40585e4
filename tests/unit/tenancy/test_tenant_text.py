"""Tenant strings that reach a header, a URL or a log line are checked when written, path named,
value never quoted: in the rules, in org documents (admin API) and in the configuration file."""

from __future__ import annotations

import re

import pytest
from test_orgs import CONFIG, doc, s

from turnout.config import parse_config
from turnout.errors import ConfigError
from turnout.rules.ssrf import AllowList
from turnout.rules.text import MAX_MODEL_CHARS, check_id, check_model, check_secret, check_url, short_name
from turnout.stored.orgs import EndpointDoc, KeyDoc, OrgDoc, SquadDoc
from turnout.tenancy.admin import AdminError, check_name
from turnout.tenancy.orgs import validate_org


@pytest.mark.parametrize(
    ("check", "value", "why"),
    [
        (check_model, "custom:ep:llama\r\nX-Evil: 1", "control character"),
        (check_model, "custom:ep:llama 3", "printable ASCII"),
        (check_model, "m" * (MAX_MODEL_CHARS + 1), "too long"),
        (check_model, "", "empty"),
        (check_model, "a catalog model", "printable ASCII"),  # a name travels in `x-turnout-model`
        (check_model, "w\u2603", "printable ASCII"),  # a header cannot carry it: refused when written
        (check_secret, "sk-abc\nX-Evil: 1", "control character"),
        (check_secret, "sk abc", "printable ASCII"),
        (check_secret, "sk-é", "printable ASCII"),
        (check_id, "a\u2028b", "control character"),
        (check_id, "x" * 65, "too long"),
        (check_url, "https://a.example/v1\x00", "control character"),
        (check_url, "https://a.example/" + "p" * 2048, "too long"),
    ],
    ids=[
        "model-crlf",
        "custom-model-space",
        "model-long",
        "model-empty",
        "model-space",
        "model-non-ascii",
        "key-lf",
        "key-space",
        "key-non-ascii",
        "id-line-separator",
        "id-long",
        "url-nul",
        "url-long",
    ],
)
def test_unfit_strings_are_refused_with_the_path_and_without_the_value(check: object, value: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check("some.path", value)  # type: ignore[operator]
    assert str(caught.value).startswith("some.path: ") and why in str(caught.value)
    assert value not in str(caught.value) or not value


def test_fit_strings_pass() -> None:
    check_model("p", "custom:ep:llama3:8b-instruct")
    check_model("p", "gpt-4o-mini-2024-07-18")
    check_secret("p", "sk-proj-AbC_123-xyz")
    check_secret("p", "operator key with spaces", platform=True)
    check_id("p", "ci-bot.v2")
    check_url("p", "https://a.example/v1")


@pytest.mark.parametrize(
    ("parts", "path"),
    [
        ({"key": s(reroutes=["custom:ep:m\r\nx"])}, "keys.k.settings.reroutes[0]"),
        ({"org": s(fallbacks={"m1": ["custom:ep:" + "m" * 300]})}, "settings.fallbacks.m1[0]"),
    ],
    ids=["custom-crlf-in-key-settings", "custom-too-long-in-org-fallbacks"],
)
def test_validate_org_refuses_unfit_model_names(parts: dict[str, object], path: str) -> None:
    d, _ = doc(endpoints={"ep": "https://ep.example/v1"}, **parts)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="^" + re.escape(path) + ": "):
        validate_org(d, CONFIG, AllowList())


def test_validate_org_refuses_unfit_ids() -> None:
    base, key = doc()
    bad_key = OrgDoc(id="acme", keys={"k\n": KeyDoc(name="k\n", digest="0" * 64, prefix="tk-0")})
    with pytest.raises(ConfigError, match=r"^keys\.k\n: contains a control character"):
        validate_org(bad_key, CONFIG, AllowList())
    bad_squad = OrgDoc(id="acme", squads={"s\r": SquadDoc()})
    with pytest.raises(ConfigError, match=r"^squads\.s\r: "):
        validate_org(bad_squad, CONFIG, AllowList())
    with pytest.raises(ConfigError, match=r"^id: "):
        validate_org(OrgDoc(id="ac me", keys={"k": key}), CONFIG, AllowList())
    long_url = OrgDoc(id="acme", custom_endpoints={"ep": EndpointDoc(base_url="https://a.example/" + "p" * 2100)})
    with pytest.raises(ConfigError, match=r"^custom_endpoints\.ep\.base_url: is too long"):
        validate_org(long_url, CONFIG, AllowList())
    validate_org(base, CONFIG, AllowList())


FILE = """
providers:
  a: {{kind: openai_compatible, base_url: "https://a.example/v1", api_key: ka}}
models:
  m1: {{offers: [{{provider: a, model: m1}}]}}
orgs:
  acme:
{body}
"""


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ('    provider_keys: {a: "sk-abc\\r\\nX: 1"}', "orgs.acme.provider_keys.a"),
        (
            '    custom_endpoints: {ep: {base_url: "https://ep.example/v1", api_key: "k\\n1"}}',
            "orgs.acme.custom_endpoints.ep.api_key",
        ),
        ('    keys: [{name: ci, key: "tk-abc\\r\\ndefgh"}]', "orgs.acme.keys[0].key"),
        ('    keys: [{name: "c\\ni", key: "tk-abcdefgh"}]', "orgs.acme.keys[0].name"),
        ('    squads: {"sq\\r": {}}', "orgs.acme.squads.sq\r"),
        (
            (
                '    custom_endpoints: {ep: {base_url: "https://ep.example/v1"}}\n'
                '    settings: {reroutes: ["custom:ep:m\\r\\nx"]}'
            ),
            "orgs.acme.settings.reroutes[0]",
        ),
    ],
    ids=["byok-crlf", "endpoint-key-lf", "gateway-key-crlf", "key-name-lf", "squad-cr", "custom-model-crlf"],
)
def test_the_configuration_file_is_checked_the_same_way(body: str, path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(FILE.format(body=body), env={})
    assert str(caught.value).startswith(f"{path}: "), str(caught.value)
    assert "abc" not in str(caught.value)


def test_a_long_name_in_an_error_path_is_cut() -> None:
    assert short_name("gpt") == "'gpt'"
    assert short_name("m" * 300) == f"{'m' * 40!r}… (300 characters)"


@pytest.mark.parametrize("name", ["a?b#c", "-x", "a b", "a:b", "x" * 65, "", "é"])
def test_the_admin_api_creates_ids_of_letters_digits_dot_underscore_dash_only(name: str) -> None:
    """README "Admin API": ids created through the admin API are 1–64 of `A-Z a-z 0-9 . _ -`, starting
    with a letter or digit."""
    with pytest.raises(AdminError) as info:
        check_name("id", name)
    assert info.value.param == "id" and "A-Z a-z 0-9 . _ -" in info.value.message
    for fit in ("a", "9lives", "a.b_c-1", "x" * 64):
        check_name("id", fit)


def test_the_file_declares_ids_of_any_printable_ascii_as_the_readme_says() -> None:
    config = parse_config(
        FILE.format(body='    squads: {"r&d": {}}\n    keys: [{name: "ci?bot", key: tk-abcdefgh}]').replace(
            "  acme:", '  "a?b#c":'
        ),
        env={},
    )
    assert list(config.raw.orgs) == ["a?b#c"]
    assert list(config.raw.orgs["a?b#c"].squads) == ["r&d"] and config.raw.orgs["a?b#c"].keys[0].name == "ci?bot"
