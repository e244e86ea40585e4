"""The family registry covers every provider kind, and each entry is an `ApiFamily`."""

from __future__ import annotations

import inspect
from typing import get_args

import pytest

from turnout.adapters.base import ApiFamily
from turnout.adapters.families import FAMILIES
from turnout.config import ProviderKind


def test_every_provider_kind_has_exactly_one_family() -> None:
    assert sorted(FAMILIES) == sorted(get_args(ProviderKind))


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        FAMILIES["openai"] = FAMILIES["anthropic"]  # type: ignore[index]


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_family_has_every_member_of_the_protocol(kind: str) -> None:
    family = FAMILIES[kind]  # type: ignore[index]
    members = [name for name, _ in inspect.getmembers(ApiFamily) if not name.startswith("_")]
    assert members == [
        "build_request",
        "native_frames",
        "native_surface",
        "read_outcome",
        "refusal",
        "stream_end",
        "stream_events",
        "stream_media_type",
    ]
    assert all(hasattr(family, name) for name in members)
    assert isinstance(family.stream_end, str) and family.stream_end


def test_compatible_providers_share_the_openai_family() -> None:
    assert FAMILIES["openai_compatible"] is FAMILIES["openai"]
    assert FAMILIES["anthropic"] is not FAMILIES["openai"]
