"""The catalog: each model's ordering, its only offers, and which offers accept a prefill."""

from __future__ import annotations

from turnout.catalog import Catalog
from turnout.config import parse_config

CONFIG = """
providers:
  anthropic: {kind: anthropic, base_url: "https://api.anthropic.com", api_key: k1}
  openai:    {kind: openai, base_url: "https://api.openai.com/v1", api_key: k2}
  groq:      {kind: openai_compatible, base_url: "https://api.groq.com/openai/v1", api_key: k3}
models:
  claude: {offers: [{provider: anthropic, model: claude-sonnet-4-5}]}
  mixed:
    offers:
      - {provider: openai, model: gpt-5, supports_prefill: false}
      - {provider: groq, model: llama}
      - {provider: anthropic, model: claude-opus}
"""


def test_catalog_knows_each_models_ordering_and_its_only_offers() -> None:
    catalog = Catalog(parse_config(CONFIG))
    assert catalog.orders == {"claude": "health", "mixed": "health"}
    assert catalog.sole_targets == frozenset({"anthropic/claude-sonnet-4-5"})


def test_catalog_supports_prefill_defaults_true_and_reads_the_offer() -> None:
    catalog = Catalog(parse_config(CONFIG))
    assert catalog.supports_prefill["openai/gpt-5"] is False
    assert catalog.supports_prefill["groq/llama"] is True
    assert catalog.supports_prefill["anthropic/claude-sonnet-4-5"] is True
