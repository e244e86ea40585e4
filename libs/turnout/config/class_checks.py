"""The rules of comparability classes and the policy fields that use them (issue #45 item 7;
README "Comparable alternates").

Owns: what `class:` on a catalog model and `fallback.comparable` / `fallback.only` of a policy may
say beyond their types. A class is declared on chat models only (an embedding model's vectors are
comparable with no other model's: `turnout.core.model_types.VECTOR_SPACE_RULE`); a class that no
other model shares but whose name is close to one that is (`frontier_chat` beside
`frontier-chat`) is taken for a misspelt reference to it; a policy that turns `comparable` on
needs at least one chat model with a class; and a `fallback.models` entry that its own policy's
`only` leaves out would never be planned. The file and the admin API's edits (catalog models,
scope settings) go through the same rules.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from turnout.config.findings import Findings
from turnout.config.providers import ModelConfig
from turnout.core.model_types import VECTOR_SPACE_RULE
from turnout.core.policy import FallbackPolicy


def check_classes(found: Findings, models: Mapping[str, ModelConfig]) -> None:
    """`models.<id>.class`: never on an embedding model, and not a near miss of another model's class.

    Errors: `models.embed.class: an embedding model has no comparable alternates; ...`,
    `models.m.class: no other model is of class 'frontier_chat' (did you mean 'frontier-chat'?)`.
    """
    members: dict[str, list[str]] = {}
    for model, spec in models.items():
        klass = spec.comparability_class
        if klass is None:
            continue
        if spec.type == "embedding":
            found.add(f"models.{model}.class: an embedding model has no comparable alternates; {VECTOR_SPACE_RULE}")
            continue
        members.setdefault(klass, []).append(model)
    shared = sorted(c for c, ms in members.items() if len(ms) > 1)
    for klass, (model, *others) in members.items():
        close = [] if others else difflib.get_close_matches(klass, shared, n=1, cutoff=0.8)
        if close:
            found.add(f"models.{model}.class: no other model is of class {klass!r} (did you mean {close[0]!r}?)")


def check_comparable(found: Findings, path: str, fallback: FallbackPolicy, models: Mapping[str, ModelConfig]) -> None:
    """The policy at `path` (`policy`, `orgs.acme.settings.policy`; the gateway's, or a scope's merged
    over it) uses `comparable` and `only` in a way that can take effect.

    Errors: `{path}.fallback.comparable: ...` when it is on and no chat model of `models` declares a
    `class`; `{path}.fallback.models[i]: ...` for an entry its `only` does not list.
    """
    if fallback.comparable and not any(s.comparability_class is not None and s.type == "chat" for s in models.values()):
        found.add(
            f"{path}.fallback.comparable: no catalog model declares a `class`, so no comparable alternate "
            "can be planned; give the models that may stand in for each other the same `class:` "
            "(models.<id>.class: frontier-chat)"
        )
    if fallback.only:
        for i, model in enumerate(fallback.models):
            if model not in fallback.only:
                found.add(
                    f"{path}.fallback.models[{i}]: {model!r} is not in {path}.fallback.only, so it would "
                    "never be planned; add it to `only` or remove it"
                )
