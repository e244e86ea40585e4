"""The dashboard's key and provider key forms (#45 item 8) as the admin API's bodies: a key's
`PATCH .../keys/{key}` carries only what changed (an empty squad or expiry is `null`), and the
provider key form is the `PUT .../provider-keys/{provider}` body."""

from __future__ import annotations

import msgspec
import pytest

from turnout.stored.orgs import KeyDoc
from turnout_ingress.ui.key_form import key_create, key_patch, key_values, provider_key_put

KEY = KeyDoc(name="bot", digest="0" * 64, prefix="tk-abcd", squad="research", admin=False, expires_s=1_900_000_000.0)


def test_a_keys_values_are_its_squad_admin_flag_and_expiry_as_texts() -> None:
    assert key_values(KEY) == {"squad": "research", "admin": "false", "expires_at": "2030-03-17T17:46:40Z"}
    bare = KeyDoc(name="a", digest="0" * 64, prefix="tk-a", admin=True)
    assert key_values(bare) == {"squad": "", "admin": "true", "expires_at": ""}


def test_the_form_unchanged_is_no_patch() -> None:
    assert key_patch(key_values(KEY), KEY) == {}
    assert key_patch({}, KEY) == {}


@pytest.mark.parametrize(
    ("changed", "patch"),
    [
        ({"squad": "ops"}, {"squad": "ops"}),
        ({"squad": ""}, {"squad": None}),
        ({"admin": "true"}, {"admin": True}),
        ({"admin": "maybe"}, {"admin": "maybe"}),  # the admin API refuses it in its own words
        ({"expires_at": ""}, {"expires_at": None}),
        ({"expires_at": " 2031-01-01T00:00:00Z "}, {"expires_at": "2031-01-01T00:00:00Z"}),
        ({"squad": "ops", "admin": "true"}, {"squad": "ops", "admin": True}),
    ],
)
def test_a_changed_field_is_in_the_patch_and_nothing_else(changed: dict[str, str], patch: dict[str, object]) -> None:
    assert key_patch({**key_values(KEY), **changed}, KEY) == patch


def test_the_provider_key_form_is_the_put_body_with_the_key_as_typed() -> None:
    body = provider_key_put({"provider": "sim-a", "api_key": "sk-secret value", "csrf": "x"})
    assert msgspec.json.decode(body) == {"api_key": "sk-secret value"}
    assert msgspec.json.decode(provider_key_put({})) == {"api_key": ""}


def test_the_new_key_form_is_the_create_body_with_only_what_was_given() -> None:
    assert key_create({"name": " ci ", "squad": "", "admin": "false", "expires_at": "", "csrf": "x"}) == {
        "name": "ci",
        "admin": False,
    }
    full = key_create({"name": "ci", "squad": "ops", "admin": "true", "expires_at": "2031-01-01T00:00:00Z"})
    assert full == {"name": "ci", "squad": "ops", "admin": True, "expires_at": "2031-01-01T00:00:00Z"}
    assert key_create({"name": "ci", "admin": "yes"})["admin"] == "yes"  # the admin API refuses it in its own words
