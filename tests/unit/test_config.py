"""Tests for turnout.config (SPEC §11: the configuration file)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from turnout.config import Config, load_config, parse_config
from turnout.core.policy import Ceilings, Policy
from turnout.errors import ConfigError

# SPEC §11, verbatim, plus the `azure-east` provider its catalog refers to.
SPEC_EXAMPLE = """\
providers:
  openai:      {kind: openai, base_url: https://api.openai.com/v1, api_key: ${OPENAI_API_KEY}}
  anthropic:   {kind: anthropic, base_url: https://api.anthropic.com, api_key: ${ANTHROPIC_API_KEY}}
  groq:        {kind: openai_compatible, base_url: https://api.groq.com/openai/v1, api_key: ${GROQ_API_KEY}}
AZURE_EAST_LINE
models:                       # the catalog: model id -> offers
  gpt-5:
    offers:
      - {provider: openai, model: gpt-5, input_usd_per_mtok: 1.25, output_usd_per_mtok: 10}
      - {provider: azure-east, model: gpt-5-prod}
    context_window: 400000
  claude-sonnet-4-5:
    offers: [{provider: anthropic, model: claude-sonnet-4-5}]

policy: {}                    # gateway-wide defaults (§4); omitted fields keep SPEC defaults
ceilings: {max_retries: 6, max_attempts: 6, max_total_latency_ms: 180000, max_cycles: 3}
breaker:  {consecutive_failures: 3, window: 50, cooldown_s: 30, max_cooldown_s: 300}

orgs:
  acme:
    settings:                 # any of: reroutes, fallbacks, policy, key_mode, context_window_fallbacks
      fallbacks: {"*": [claude-sonnet-4-5]}
    provider_keys: {openai: ${ACME_OPENAI_KEY}}            # BYOK
    custom_endpoints: {local-vllm: {base_url: http://10.0.0.5:8000/v1, api_key: ${VLLM_KEY}}}
    squads:
      research: {settings: {reroutes: [gpt-5]}}
    keys:
      - {name: ci-bot, squad: research, key: ${TURNOUT_KEY_CI_BOT}}   # stored hashed
"""
AZURE_EAST = (
    "  azure-east:  {kind: openai_compatible, base_url: https://east.example.com/openai/v1, api_key: ${AZURE_EAST_KEY}}"
)
SPEC_ENV = {
    "OPENAI_API_KEY": "sk-openai",
    "ANTHROPIC_API_KEY": "sk-ant",
    "GROQ_API_KEY": "gsk-groq",
    "AZURE_EAST_KEY": "az-east",
    "ACME_OPENAI_KEY": "sk-acme-own",
    "VLLM_KEY": "vllm-secret",
    "TURNOUT_KEY_CI_BOT": "tk-ci-bot-0123456789",
}


EGRESS_LINE = "egress: {schemes: [http], ports: any, allow: [10.0.0.0/8]}\n"


def spec_example(with_azure_east: bool = True, with_egress: bool = True) -> str:
    """The SPEC's example file; as printed it lacks the `azure-east` provider its catalog names, and the
    `egress:` section its org's on-prem endpoint needs (the file's orgs are checked as the ingress merges them)."""
    text = SPEC_EXAMPLE.replace("AZURE_EAST_LINE\n", AZURE_EAST + "\n" if with_azure_east else "")
    return text + EGRESS_LINE if with_egress else text


# --------------------------------------------------------------------- the SPEC example


def test_config_spec_example_parses() -> None:
    config = parse_config(spec_example(), env=SPEC_ENV)
    raw = config.raw
    assert isinstance(config, Config)
    assert sorted(raw.providers) == ["anthropic", "azure-east", "groq", "openai"]
    assert raw.providers["openai"].api_key == "sk-openai"
    assert raw.providers["groq"].kind == "openai_compatible"
    assert raw.providers["groq"].base_url == "https://api.groq.com/openai/v1"
    gpt5 = raw.models["gpt-5"]
    assert [(o.provider, o.model) for o in gpt5.offers] == [("openai", "gpt-5"), ("azure-east", "gpt-5-prod")]
    assert (gpt5.offers[0].input_usd_per_mtok, gpt5.offers[0].output_usd_per_mtok) == (1.25, 10.0)
    assert gpt5.context_window == 400_000
    assert config.policy == Policy()
    assert raw.ceilings == Ceilings()
    assert (
        raw.breaker.consecutive_failures,
        raw.breaker.window,
        raw.breaker.cooldown_s,
        raw.breaker.max_cooldown_s,
    ) == (3, 50, 30.0, 300.0)
    acme = raw.orgs["acme"]
    assert acme.settings.fallbacks == {"*": ["claude-sonnet-4-5"]}
    assert acme.provider_keys == {"openai": "sk-acme-own"}
    assert acme.custom_endpoints["local-vllm"].base_url == "http://10.0.0.5:8000/v1"
    assert acme.custom_endpoints["local-vllm"].api_key == "vllm-secret"
    assert acme.squads["research"].settings.reroutes == ["gpt-5"]
    assert [(k.name, k.squad, k.key) for k in acme.keys] == [("ci-bot", "research", "tk-ci-bot-0123456789")]


def test_config_spec_example_without_egress_refuses_its_on_prem_endpoint_as_the_ingress_would() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(spec_example(with_egress=False), env=SPEC_ENV)
    assert str(info.value) == (
        "orgs.acme.custom_endpoints.local-vllm.base_url: refused: the base URL must start with https:// "
        "(the operator's egress policy)"
    )
    with pytest.raises(ConfigError, match=r"local-vllm\.base_url: refused: .*10\.0\.0\.5 is a private address"):
        parse_config(spec_example(with_egress=False).replace("http://10.0.0.5:8000", "https://10.0.0.5"), env=SPEC_ENV)
    allowed = {**SPEC_ENV, "TURNOUT_SSRF_ALLOW": "10.0.0.0/8"}  # the variable admits the address, not http
    assert parse_config(
        spec_example(with_egress=False).replace("http://10.0.0.5:8000", "https://10.0.0.5"), env=allowed
    )


def test_config_spec_example_as_printed_lacks_the_azure_east_provider() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(spec_example(with_azure_east=False), env=SPEC_ENV)
    assert str(info.value) == "models.gpt-5.offers[1].provider: unknown provider 'azure-east'"


def test_config_load_config_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "turnout.yaml"
    path.write_text(spec_example(), encoding="utf-8")
    config = load_config(path, env=SPEC_ENV)
    assert config.source == str(path)
    assert "gpt-5" in config.raw.models


def test_config_load_config_missing_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: cannot read")


# --------------------------------------------------------------------- ${NAME}


def test_config_missing_env_var_names_the_path() -> None:
    env = {k: v for k, v in SPEC_ENV.items() if k != "ACME_OPENAI_KEY"}
    with pytest.raises(ConfigError) as info:
        parse_config(spec_example(), env=env)
    message = str(info.value)
    assert message.startswith("orgs.acme.provider_keys.openai: ")
    assert "ACME_OPENAI_KEY" in message


def test_config_missing_env_var_in_a_list_names_the_index() -> None:
    env = {k: v for k, v in SPEC_ENV.items() if k != "TURNOUT_KEY_CI_BOT"}
    with pytest.raises(ConfigError) as info:
        parse_config(spec_example(), env=env)
    assert str(info.value).startswith("orgs.acme.keys[0].key: environment variable TURNOUT_KEY_CI_BOT is not set")


MINIMAL = """\
providers:
  openai: {kind: openai, base_url: BASE, api_key: KEY}
models:
  gpt-5: {offers: [{provider: openai, model: gpt-5}]}
"""


def minimal(base: str = "https://api.openai.com/v1", key: str = "sk") -> str:
    return MINIMAL.replace("BASE", base).replace("KEY", key)


@pytest.mark.parametrize(
    ("key", "env", "expected"),
    [
        ("${OPENAI_KEY:-sk-default}", {}, "sk-default"),
        ("${OPENAI_KEY:-sk-default}", {"OPENAI_KEY": "sk-env"}, "sk-env"),
        ("${OPENAI_KEY:-}", {}, ""),
        ("${OPENAI_KEY}", {"OPENAI_KEY": ""}, ""),
        ("'${A}-${B:-b}'", {"A": "a"}, "a-b"),
        ("'sk-${OPENAI_KEY}'", {"OPENAI_KEY": "123"}, "sk-123"),
        ("${OPENAI_KEY:-a b, c}", {}, "a b, c"),
    ],
    ids=[
        "default-used",
        "env-wins-over-default",
        "empty-default",
        "empty-env",
        "two-refs",
        "embedded",
        "default-with-flow-characters",
    ],
)
def test_config_env_interpolation(key: str, env: dict[str, str], expected: str) -> None:
    config = parse_config(minimal(key=key), env=env)
    assert config.raw.providers["openai"].api_key == expected


def test_config_env_interpolation_inside_a_url() -> None:
    config = parse_config(minimal(base="http://${HOST:-localhost}:${PORT}/v1"), env={"PORT": "8000"})
    assert config.raw.providers["openai"].base_url == "http://localhost:8000/v1"


def test_config_env_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY_FROM_ENVIRON", "sk-from-environ")
    config = parse_config(minimal(key="${TEST_OPENAI_KEY_FROM_ENVIRON}"))
    assert config.raw.providers["openai"].api_key == "sk-from-environ"


def test_config_env_values_are_not_parsed_as_yaml() -> None:
    config = parse_config(minimal(key="${K}"), env={"K": "{a: 1}, # not yaml"})
    assert config.raw.providers["openai"].api_key == "{a: 1}, # not yaml"


def test_config_env_reference_in_a_comment_is_ignored() -> None:
    config = parse_config(minimal() + "# api_key: ${NOT_SET_ANYWHERE}\n", env={})
    assert config.raw.providers["openai"].api_key == "sk"


# --------------------------------------------------------------------- invalid files


EGRESS_ON_PREM: dict[str, Any] = {"schemes": ["http"], "ports": "any", "allow": ["10.0.0.0/8"]}
"""The egress policy under which the on-prem endpoint `http://10.0.0.5:8000/v1` may be registered."""

BASE: dict[str, Any] = {
    "providers": {
        "openai": {"kind": "openai", "base_url": "https://api.openai.com/v1", "api_key": "sk"},
        "anthropic": {"kind": "anthropic", "base_url": "https://api.anthropic.com", "api_key": "sk-ant"},
    },
    "models": {
        "gpt-5": {"offers": [{"provider": "openai", "model": "gpt-5"}]},
        "claude": {"offers": [{"provider": "anthropic", "model": "claude-sonnet-4-5"}]},
    },
    "orgs": {
        "acme": {
            "settings": {},
            "custom_endpoints": {"local-vllm": {"base_url": "http://10.0.0.5:8000/v1"}},
            "squads": {"research": {}},
            "keys": [{"name": "ci-bot", "squad": "research", "key": "tk-acme-0001"}],
        },
    },
    "egress": EGRESS_ON_PREM,
}


def with_(path: str, value: Any) -> str:
    """BASE with `value` set at the dotted `path` (list indexes as numbers), as YAML."""
    data = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return yaml.safe_dump(data, sort_keys=False)


def test_config_base_of_the_invalid_cases_is_valid() -> None:
    parse_config(yaml.safe_dump(BASE), env={})


INVALID: list[tuple[str, str, str]] = [
    (
        with_("models.gpt-5.offers", [{"provider": "azure-east", "model": "gpt-5-prod"}]),
        "models.gpt-5.offers[0].provider: ",
        "unknown provider 'azure-east'",
    ),
    (
        with_("orgs.acme.settings.fallbacks", {"*": ["claude", "nope"]}),
        "orgs.acme.settings.fallbacks.*[1]: ",
        "unknown model 'nope'",
    ),
    (with_("orgs.acme.settings.fallbacks", ["nope"]), "orgs.acme.settings.fallbacks[0]: ", "unknown model 'nope'"),
    (
        with_("orgs.acme.settings.fallbacks", {"nope": ["claude"]}),
        "orgs.acme.settings.fallbacks",
        "unknown model 'nope'",
    ),
    (
        with_("orgs.acme.squads.research", {"settings": {"reroutes": ["gpt-6"]}}),
        "orgs.acme.squads.research.settings.reroutes[0]: ",
        "unknown model 'gpt-6'",
    ),
    (
        with_("orgs.acme.settings.context_window_fallbacks", {"gpt-5": ["gpt-9"]}),
        "orgs.acme.settings.context_window_fallbacks.gpt-5[0]: ",
        "unknown model 'gpt-9'",
    ),
    (
        with_("policy", {"fallback": {"models": ["claude", "nope"]}}),
        "policy.fallback.models[1]: ",
        "unknown model 'nope'",
    ),
    (
        with_("orgs.acme.settings.policy", {"fallback": {"models": ["claude", "nope"]}}),
        "orgs.acme.settings.policy.fallback.models[1]: ",
        "unknown model 'nope'",
    ),
    (
        with_("orgs.acme.keys.0.settings", {"policy": {"fallback": {"models": ["custom:nowhere:llama"]}}}),
        "orgs.acme.keys[0].settings.policy.fallback.models[0]: ",
        "names no custom endpoint",
    ),
    (
        with_("orgs.acme.settings.reroutes", ["custom:local-vllm"]),
        "orgs.acme.settings.reroutes[0]: ",
        "malformed entry 'custom:local-vllm'",
    ),
    (
        with_("orgs.acme.settings.fallbacks", {"*": ["claude", "custom::llama"]}),
        "orgs.acme.settings.fallbacks.*[1]: ",
        "malformed entry",
    ),
    (
        with_("orgs.acme.settings.fallbacks", ["custom:local-vllm:"]),
        "orgs.acme.settings.fallbacks[0]: ",
        "malformed entry",
    ),
    (
        with_("orgs.acme.settings.reroutes", ["custom:other-org-key:llama"]),
        "orgs.acme.settings.reroutes[0]: ",
        "names no custom endpoint of this org",
    ),
    (
        with_("policy", {"fallback": {"models": ["custom:local-vllm:llama"]}}),
        "policy.fallback.models[0]: ",
        "names no custom endpoint",
    ),
    (
        with_("orgs.acme.settings.fallbacks", {"gpt-5": ["claude"], "claude": ["gpt-5"]}),
        "orgs.acme.settings.fallbacks: ",
        "fallback cycle gpt-5 -> claude -> gpt-5",
    ),
    (
        with_("orgs.acme.squads.research", {"settings": {"fallbacks": {"gpt-5": ["gpt-5"]}}}),
        "orgs.acme.squads.research.settings.fallbacks: ",
        "fallback cycle gpt-5 -> gpt-5",
    ),
    (with_("policy", {"retry": {"max_retries": 9}}), "policy.retry.max_retries: ", "9 is outside the allowed range"),
    (with_("policy", {"budget": {"max_total_latency_ms": 300000}}), "policy.budget.max_total_latency_ms: ", "300000"),
    (
        with_("orgs.acme.settings.policy", {"budget": {"max_attempts": 10}}),
        "orgs.acme.settings.policy.budget.max_attempts: ",
        "10 is outside the allowed range",
    ),
    (
        with_("orgs.acme.keys.0.settings", {"policy": {"retry": {"base_ms": 10}}}),
        "orgs.acme.keys[0].settings.policy.retry.base_ms: ",
        "10 is outside the allowed range",
    ),
    (with_("policy", {"retry": {"max_retry": 2}}), "policy.retry.max_retry: ", "unknown field"),
    (with_("policy", {"fallback": {"on_exhausted": "first"}}), "policy.fallback.on_exhausted: ", "Invalid enum value"),
    (
        with_("orgs.acme.keys.0.settings", {"policy": {"fallback": {"on_exhausted": "upstream"}}}),
        "orgs.acme.keys[0].settings.policy.fallback.on_exhausted: ",
        "Invalid enum value 'upstream'",
    ),
    (
        with_("orgs.acme.settings.policy", {"pinned": {"allow_other_providers": "yes"}}),
        "orgs.acme.settings.policy.pinned.allow_other_providers: ",
        "Expected `bool`",
    ),
    (with_("policy", {"retries": {}}), "policy.retries: ", "unknown field"),
    (
        with_("orgs.acme.settings.policy", {"budget": {"max_attempts": "six"}}),
        "orgs.acme.settings.policy.budget.max_attempts: ",
        "Expected `int`, got `str`",
    ),
    (with_("bogus", 1), "bogus: ", "unknown field `bogus`"),
    (with_("orgs.acme.settings.reroute", ["claude"]), "orgs.acme.settings.reroute: ", "unknown field"),
    (with_("ceilings", {"max_retries": "six"}), "ceilings.max_retries: ", "Expected `int`, got `str`"),
    (with_("models.gpt-5.context_window", "big"), "models.gpt-5.context_window: ", "Expected `int | null`"),
    (
        with_("models.claude.offers.0.input_usd_per_mtok", "cheap"),
        "models.claude.offers[0].input_usd_per_mtok: ",
        "Expected `float`",
    ),
    (with_("providers.openai.kind", "azure"), "providers.openai.kind: ", "Invalid enum value 'azure'"),
    (with_("orgs.acme.settings.key_mode", "byok"), "orgs.acme.settings.key_mode: ", "Invalid enum value"),
    (
        with_("orgs.acme.squads.research", {"settings": {"reroutes": "claude"}}),
        "orgs.acme.squads.research.settings.reroutes: ",
        "Expected `array",
    ),
    (with_("models", {}), "models: ", "catalog is empty"),
    (with_("models.claude.offers", []), "models.claude.offers: ", "at least one offer"),
    (with_("providers.openai.base_url", "api.openai.com"), "providers.openai.base_url: ", "http(s) URL"),
    (
        with_("providers.openai.base_url", "https://user:pw@api.openai.com"),
        "providers.openai.base_url: ",
        "without credentials",
    ),
    (with_("providers.openai.base_url", "https://"), "providers.openai.base_url: ", "http(s) URL"),
    (
        with_("providers.openai.base_url", "https://east.example.com/openai?api-version=2024-10-21"),
        "providers.openai.base_url: ",
        "must not carry a query",
    ),
    (with_("providers.openai.base_url", "https://api.example.com/v1#frag"), "providers.openai.base_url: ", "fragment"),
    (with_("providers.openai.base_url", "ftp://files.example.com"), "providers.openai.base_url: ", "http(s) URL"),
    (with_("providers.openai.base_url", "https://api.openai.com /v1"), "providers.openai.base_url: ", "http(s)"),
    (with_("orgs.acme.provider_keys", {"mistral": "k"}), "orgs.acme.provider_keys.mistral: ", "unknown provider"),
    (with_("orgs.acme.keys.0.key", "short"), "orgs.acme.keys[0].key: ", "at least 8 characters"),
    (
        with_("orgs.beta", {"keys": [{"name": "dup", "key": "tk-acme-0001"}]}),
        "orgs.beta.keys[0].key: ",
        "declared twice",
    ),
    (with_("orgs.acme.keys.0.squad", "marketing"), "orgs.acme.keys[0].squad: ", "unknown squad 'marketing'"),
    (with_("orgs.acme.keys.0.name", None), "orgs.acme.keys[0].name: ", "Expected `str`, got `null`"),
    (with_("models.gpt-5.order", "cheapest"), "models.gpt-5.order: ", "Invalid enum value 'cheapest'"),
    (with_("routing", {"price_mix": {"input": 0, "output": 0}}), "routing.price_mix: ", "not both 0"),
    (with_("routing", {"price_mix": {"input": -1}}), "routing.price_mix: ", "at least 0"),
    (with_("routing", {"price_mix": {"prompt": 3}}), "routing.price_mix.prompt: ", "unknown field"),
    (with_("routing", {"speed_alpha": 0}), "routing.speed_alpha: ", "(0, 1]"),
    (with_("routing", {"speed_ttl_s": 0}), "routing.speed_ttl_s: ", "at least 1 s"),
    (
        with_("orgs.acme.settings.plan_fallbacks", {"gpt-5": ["nope"]}),
        "orgs.acme.settings.plan_fallbacks.gpt-5[0]: ",
        "unknown model 'nope'",
    ),
    (
        with_("orgs.acme.settings.strategy", [{"name": "eco", "at_percent": 80, "model": "nope"}]),
        "orgs.acme.settings.strategy[0].model: ",
        "unknown model 'nope'",
    ),
    (
        with_("orgs.acme.settings.strategy", [{"name": "eco", "at_percent": 80, "model": "claude", "fallback": "x"}]),
        "orgs.acme.settings.strategy[0].fallback: ",
        "unknown model 'x'",
    ),
    (
        with_(
            "orgs.acme.settings.strategy",
            [{"name": "eco", "at_percent": 80, "model": "claude"}, {"name": "eco", "at_percent": 90, "model": "gpt-5"}],
        ),
        "orgs.acme.settings.strategy[1].name: ",
        "declared twice",
    ),
    (
        with_("orgs.acme.settings.strategy", [{"name": "eco", "at_percent": -1, "model": "claude"}]),
        "orgs.acme.settings.strategy[0].at_percent: ",
        "Expected `float` >= 0",
    ),
    (with_("orgs.acme.settings.budget", {"usd": 0}), "orgs.acme.settings.budget.usd: ", "Expected `float` > 0"),
    (
        with_("orgs.acme.settings.budget", {"usd": 5, "period": "week"}),
        "orgs.acme.settings.budget.period: ",
        "Invalid enum value 'week'",
    ),
    (with_("orgs.acme.settings.budget", {"usd": float("inf")}), "orgs.acme.settings.budget.usd: ", "<= 1.79"),
    (
        with_("orgs.acme.squads.research.settings", {"policy": {"retry": {"max_retries": -1}}}),
        "orgs.acme.squads.research.settings.policy.retry.max_retries: ",
        "Expected `int` >= 0",
    ),
    (with_("policy", {"budget": {"max_attempts": 0}}), "policy.budget.max_attempts: ", "Expected `int` >= 1"),
    (
        with_(
            "models.gpt-5.offers", [{"provider": "openai", "model": "gpt-5"}, {"provider": "openai", "model": "gpt-5"}]
        ),
        "models.gpt-5.offers[1]: ",
        "openai/gpt-5 repeats offers[0]; list each provider's model once in a model",
    ),
    (
        with_("orgs.acme.custom_endpoints", {"a:b": {"base_url": "http://10.0.0.5:8000/v1"}}),
        "orgs.acme.custom_endpoints.a:b: ",
        "an endpoint id cannot contain ':'",
    ),
    (
        with_("orgs.acme.custom_endpoints", {"meta": {"base_url": "http://169.254.169.254/v1"}}),
        "orgs.acme.custom_endpoints.meta.base_url: refused: ",
        "metadata",
    ),
    (
        with_("egress", {"allow": ["10.0.0.0/8", "10.0.0.0/33"]}),
        "egress.allow[1]: ",
        "'10.0.0.0/33' is neither a CIDR nor a host name",
    ),
    (with_("ceilings", {"max_retries": -2}), "ceilings.max_retries: ", "Expected `int` >= 0"),
    (with_("ceilings", {"max_offers": 0}), "ceilings.max_offers: ", "Expected `int` >= 1"),
    (with_("ceilings", {"max_total_latency_ms": -5}), "ceilings.max_total_latency_ms: ", "Expected `int` >= 1"),
    (with_("gateway", {"max_header_bytes": 10}), "gateway.max_header_bytes: ", "Expected `int` >= 4096"),
]
INVALID_IDS = [
    "unknown-provider-in-offer",
    "unknown-model-in-fallback-map",
    "unknown-model-in-plain-fallback-list",
    "unknown-model-as-fallback-map-key",
    "unknown-model-in-squad-reroutes",
    "unknown-model-in-context-window-list",
    "unknown-model-in-gateway-fallbacks",
    "unknown-model-in-org-policy-fallbacks",
    "unknown-custom-endpoint-in-key-policy-fallbacks",
    "custom-missing-model",
    "custom-empty-key-id",
    "custom-empty-model",
    "custom-unknown-key-id",
    "custom-in-gateway-policy",
    "fallback-cycle-a-b-a",
    "fallback-self-cycle",
    "policy-over-retries-ceiling",
    "policy-over-latency-ceiling",
    "org-policy-over-attempts-ceiling",
    "key-policy-base-ms-below-range",
    "policy-unknown-field",
    "policy-unknown-on-exhausted",
    "key-policy-unknown-on-exhausted",
    "org-policy-pinned-wrong-type",
    "policy-unknown-section",
    "org-policy-wrong-type",
    "unknown-top-level-field",
    "unknown-settings-field",
    "wrong-type-ceiling",
    "wrong-type-context-window",
    "wrong-type-price",
    "unknown-provider-kind",
    "bad-key-mode",
    "reroutes-not-a-list",
    "empty-catalog",
    "model-without-offers",
    "base-url-not-http",
    "base-url-with-credentials",
    "base-url-without-host",
    "base-url-query",
    "base-url-fragment",
    "base-url-ftp",
    "base-url-with-space",
    "byok-unknown-provider",
    "key-shorter-than-8",
    "duplicate-key-across-orgs",
    "unknown-squad",
    "null-key-name",
    "unknown-order",
    "price-mix-all-zero",
    "price-mix-negative",
    "price-mix-unknown-field",
    "speed-alpha-zero",
    "speed-ttl-zero",
    "plan-fallbacks-unknown-model",
    "strategy-unknown-model",
    "strategy-unknown-fallback",
    "strategy-duplicate-rule",
    "strategy-negative-percent",
    "budget-zero",
    "budget-unknown-period",
    "budget-infinite",
    "squad-policy-negative-retries",
    "policy-no-attempts",
    "offer-listed-twice",
    "endpoint-id-with-colon",
    "endpoint-at-metadata-address",
    "egress-allow-bad-cidr",
    "ceiling-negative-retries",
    "ceiling-no-offers",
    "ceiling-negative-latency",
    "header-limit-too-small",
]


@pytest.mark.parametrize("order", ["health", "priority", "price", "latency", "throughput", "balanced"])
def test_config_every_ordering_strategy_is_a_valid_order(order: str) -> None:
    config = parse_config(with_("models.gpt-5.order", order), env={})
    assert config.raw.models["gpt-5"].order == order


def test_config_routing_price_mix_reaches_the_catalog_order_settings() -> None:
    from turnout.catalog import Catalog
    from turnout.core.ordering import OrderSettings, PriceMix

    data = with_("routing", {"price_mix": {"input": 1, "output": 1}})
    catalog = Catalog(parse_config(data, env={}))
    settings = catalog.order_settings(OrderSettings(explore=0.0))
    assert settings.price_mix == PriceMix(input=1, output=1) and settings.explore == 0.0
    assert set(settings.prices) == {"openai/gpt-5", "anthropic/claude-sonnet-4-5"}


@pytest.mark.parametrize(("text", "path", "what"), INVALID, ids=INVALID_IDS)
def test_config_invalid_file_is_refused_naming_the_path(text: str, path: str, what: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    message = str(info.value)
    assert message.startswith(path), message
    assert what in message


@pytest.mark.parametrize(
    ("text", "what"),
    [("providers: [\n", "not valid YAML"), ("- a\n- b\n", "must be a mapping"), ("", "must be a mapping")],
    ids=["broken-yaml", "a-list", "empty-file"],
)
def test_config_unreadable_text_names_the_source(text: str, what: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={}, source="turnout.yaml")
    assert str(info.value).startswith("turnout.yaml: ")
    assert what in str(info.value)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("policy", {"retry": {"max_retries": 6}, "budget": {"max_attempts": 6, "max_total_latency_ms": 180000}}),
        ("orgs.acme.settings.fallbacks", {"gpt-5": ["claude"], "claude": []}),
        ("orgs.acme.settings.fallbacks", {"*": ["gpt-5", "claude"]}),
        ("orgs.acme.settings.content_policy_fallbacks", ["claude"]),
        ("orgs.acme.settings.key_mode", "own_then_shared"),
        ("providers.openai.base_url", "http://10.0.0.5:8000/v1"),
        ("providers.openai.base_url", "https://api.example.com/v1/user@team"),
        ("ceilings", {"max_retries": 8, "max_attempts": 10, "max_total_latency_ms": 600000, "max_cycles": 5}),
        ("orgs.acme.settings.reroutes", ["custom:local-vllm:llama3:8b"]),
        ("orgs.acme.settings.fallbacks", {"gpt-5": ["custom:local-vllm:llama"]}),
    ],
    ids=[
        "policy-at-ceilings",
        "acyclic-map",
        "star-may-name-any-model",
        "plain-content-policy-list",
        "key-mode",
        "base-url-ip-and-port",
        "base-url-at-sign-in-path",
        "raised-ceilings",
        "custom-entry-in-reroutes",
        "custom-entry-in-fallbacks",
    ],
)
def test_config_valid_variants_parse(path: str, value: Any) -> None:
    parse_config(with_(path, value), env={})


def test_config_gateway_policy_overlays_spec_defaults() -> None:
    config = parse_config(with_("policy", {"retry": {"max_retries": 3}, "fallback": {"backoff_ms": 200}}), env={})
    assert config.policy.retry.max_retries == 3
    assert config.policy.fallback.backoff_ms == 200
    assert config.policy.budget == Policy().budget


def test_config_a_policy_may_use_raised_ceilings() -> None:
    text = with_("ceilings", {"max_retries": 8})
    data = yaml.safe_load(text)
    data["policy"] = {"retry": {"max_retries": 8}}
    assert parse_config(yaml.safe_dump(data), env={}).policy.retry.max_retries == 8


def test_one_providers_model_offered_by_two_models_has_one_price() -> None:
    base = (
        'providers:\n  p: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}\n'
        "models:\n"
        "  cheap: {offers: [{provider: p, model: m, input_usd_per_mtok: 0}]}\n"
    )
    parse_config(base + "  same: {offers: [{provider: p, model: m, input_usd_per_mtok: 0}]}\n", env={})
    for other in ("input_usd_per_mtok: 5", "output_usd_per_mtok: 1", "supports_prefill: false"):
        with pytest.raises(ConfigError) as info:
            parse_config(base + f"  dear: {{offers: [{{provider: p, model: m, {other}}}]}}\n", env={})
        assert str(info.value).startswith("models.dear.offers[0]: p/m is also models.cheap.offers[0], with other")


@pytest.mark.parametrize("entry", ['"Z"', "99999", "-1", '"abc"', '"5x"', '"' + "Z" * 1000 + '"'])
def test_a_status_list_entry_that_is_no_status_nor_class_is_refused_naming_it(entry: str) -> None:
    text = (
        'providers:\n  p: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}\n'
        "models:\n  m: {offers: [{provider: p, model: m}]}\n"
        f"policy:\n  retry: {{retry_on_status: [429, {entry}]}}\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    assert str(info.value).startswith("policy.retry.retry_on_status[1]:")
    good = text.replace(entry, '"5xx", " 503 ", 529')
    assert parse_config(good, env={}).policy.retry.retry_on_status == (429, "5xx", " 503 ", 529)


def test_a_stored_catalog_with_a_repeated_offer_plans_it_once() -> None:
    from turnout.catalog.snapshot import Catalog
    from turnout.config import OfferConfig, with_catalog

    config = parse_config(yaml.safe_dump(BASE), env={})
    twice = msgspec.structs.replace(
        config.raw.models["gpt-5"],
        offers=(OfferConfig(provider="openai", model="gpt-5"), OfferConfig(provider="openai", model="gpt-5")),
    )
    # written before the file check refused repeats: read back unchecked, as a process reads Redis's catalog
    stored = with_catalog(config, config.raw.providers, {**config.raw.models, "gpt-5": twice}, check=False)
    catalog = Catalog(stored)
    assert [t.key for t in catalog.models["gpt-5"]] == ["openai/gpt-5"], "one target, attempted once"
    assert "openai/gpt-5" in catalog.sole_targets
    with pytest.raises(ConfigError, match=r"offers\[1\]: openai/gpt-5 repeats offers\[0\]"):
        with_catalog(config, config.raw.providers, {**config.raw.models, "gpt-5": twice})


@pytest.mark.parametrize(
    ("section", "value", "path"),
    [
        ("policy: {budget: {max_total_latency_ms: 99999999999999999999}}", None, "policy.budget.max_total_latency_ms"),
        ("ceilings: {max_total_latency_ms: 9223372036854775807}", None, "ceilings.max_total_latency_ms"),
        ("policy: {retry: {max_retries: 2147483648}}", None, "policy.retry.max_retries"),
        ("gateway: {result_ttl_s: 99999999999999999999}", None, "gateway.result_ttl_s"),
        ("gateway: {records_max: -1}", None, "gateway.records_max"),
        ("gateway: {job_lease_s: 1.0e+300}", None, "gateway.job_lease_s"),
        ("gateway: {default_completion_tokens: 0}", None, "gateway.default_completion_tokens"),
        ("gateway: {default_completion_tokens: 2147483648}", None, "gateway.default_completion_tokens"),
        ("breaker: {probe_ttl_s: 1.0e+300}", None, "breaker.probe_ttl_s"),
        ("ceilings: {max_total_latency_ms: 2147483647}", 2147483647, None),
    ],
)
def test_numbers_past_what_a_job_or_redis_can_hold_are_refused_naming_the_field(
    section: str, value: int | None, path: str | None
) -> None:
    """Such values passed the check and then broke every queued request (500 from the job's
    encoding, or a 503 naming Redis while Redis was fine)."""
    text = minimal() + section + "\n"
    if path is None:
        assert parse_config(text, env={}).raw.ceilings.max_total_latency_ms == value
        return
    with pytest.raises(ConfigError) as info:
        parse_config(text, env={})
    assert str(info.value).startswith(f"{path}: Expected"), str(info.value)


def test_top_level_x_keys_hold_anchors_and_are_otherwise_ignored() -> None:
    text = (
        "x-retry: &retry {max_retries: 1, retry_on_status: [429, 5xx]}\n"
        "x-notes: anything at all\n" + minimal() + "policy: {retry: {<<: *retry, base_ms: 500}}\n"
    )
    config = parse_config(text, env={})
    assert (config.policy.retry.max_retries, config.policy.retry.base_ms) == (1, 500)
    with pytest.raises(ConfigError, match=r"^defaults: unknown field `defaults`"):
        parse_config("defaults: {a: 1}\n" + minimal(), env={})  # only `x-` keys are the file's own


def test_a_status_entry_error_says_the_rule_in_words_and_quotes_what_was_written() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(minimal() + "policy: {retry: {retry_on_status: [429, abc]}}\n", env={})
    assert str(info.value) == (
        "policy.retry.retry_on_status[1]: Expected an HTTP status from 100 to 599 "
        "(429, also \"429\") or a class (5xx), got 'abc'"
    )
