"""Admin edits as pure functions: whole new document or a refusal naming the path; reads never show secrets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec
import pytest
from cryptography.fernet import Fernet

from turnout.core.scopes import ScopeSettings
from turnout.stored.orgs import EndpointDoc, OrgDoc
from turnout.tenancy.admin import (
    AdminError,
    KeyCreate,
    KeyPatch,
    SquadCreate,
    add_key,
    add_squad,
    decode,
    patch_key,
    put_endpoint,
    put_provider_key,
    remove_endpoint,
    remove_squad,
    revoke_key,
    rotate_secrets,
    settings_patch,
)
from turnout.tenancy.orgs import FALLBACK_MAPS, hash_token
from turnout.tenancy.views import key_view, org_view
from turnout.vault import Sealed, Vault, endpoint_binding, generate_key, provider_key_binding

TOKEN = "tk-abcdefgh-secret-part-000000000000"


def org() -> OrgDoc:
    doc = add_squad(OrgDoc(id="acme"), SquadCreate(name="research"), 1.0)
    doc, _ = add_key(doc, KeyCreate(name="ci", squad="research"), TOKEN, 1.0)
    return doc


def test_add_key_stores_only_the_digest_and_the_view_shows_neither() -> None:
    doc = org()
    assert doc.keys["ci"].digest == hash_token(TOKEN) and doc.keys["ci"].prefix == "tk-abcdefgh"
    view = key_view(doc.keys["ci"], 2.0)
    text = msgspec.json.encode(view).decode()
    assert TOKEN not in text and hash_token(TOKEN) not in text
    assert view["prefix"] == "tk-abcdefgh…" and view["status"] == "active"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (KeyCreate(name="ci"), "name"),
        (KeyCreate(name="bad name"), "name"),
        (KeyCreate(name="x", ttl_s=-1), "ttl_s"),
        (KeyCreate(name="x", expires_at="2001-01-01T00:00:00Z"), "expires_at"),
        (KeyCreate(name="x", expires_at="yesterday"), "expires_at"),
        (KeyCreate(name="x", expires_at=5.0, ttl_s=5.0), "expires_at"),
    ],
    ids=["duplicate", "bad-name", "negative-ttl", "past-expiry", "garbage-expiry", "both"],
)
def test_add_key_refusals_name_the_field(body: KeyCreate, param: str) -> None:
    with pytest.raises(AdminError) as info:
        add_key(org(), body, "tk-other-0000000000000000", 1_700_000_000.0)
    assert info.value.param == param


def test_key_expiry_and_revocation_show_in_the_view() -> None:
    doc, key = add_key(org(), KeyCreate(name="tmp", ttl_s=10), "tk-tmp-00000000000000", 100.0)
    assert key.expires_s == 110.0
    assert key_view(key, 109.0)["status"] == "active" and key_view(key, 110.0)["status"] == "expired"
    doc = revoke_key(doc, "tmp", 105.0)
    assert key_view(doc.keys["tmp"], 106.0)["status"] == "revoked"
    assert revoke_key(doc, "tmp", 107.0) is doc
    doc = patch_key(doc, "ci", KeyPatch(squad=None, admin=True), 3.0)
    assert doc.keys["ci"].squad is None and doc.keys["ci"].admin


def test_a_key_expiry_moved_into_the_past_is_refused_as_at_creation() -> None:
    now_s = 1_900_000_000.0  # 2030-03-17
    doc, _ = add_key(org(), KeyCreate(name="tmp", ttl_s=10), "tk-tmp-00000000000000", now_s)
    with pytest.raises(AdminError) as info:
        patch_key(doc, "tmp", KeyPatch(expires_at="2000-01-01T00:00:00Z"), now_s)
    assert (info.value.status_code, info.value.param) == (400, "expires_at")
    assert "is in the past; to end the key now, revoke it" in info.value.message
    assert patch_key(doc, "tmp", KeyPatch(expires_at=now_s + 60), now_s).keys["tmp"].expires_s == now_s + 60
    assert patch_key(doc, "tmp", KeyPatch(expires_at=None), now_s).keys["tmp"].expires_s is None


def test_missing_objects_are_one_404() -> None:
    edits: list[Callable[[OrgDoc], object]] = [
        lambda d: revoke_key(d, "ghost", 1.0),
        lambda d: remove_squad(d, "ghost"),
        lambda d: remove_endpoint(d, "ghost"),
        lambda d: patch_key(d, "ghost", KeyPatch(), 1.0),
    ]
    for edit in edits:
        with pytest.raises(AdminError) as info:
            edit(org())
        assert (info.value.status_code, info.value.message) == (404, "No such object.")


def test_squad_with_keys_cannot_be_deleted() -> None:
    with pytest.raises(AdminError) as info:
        remove_squad(org(), "research")
    assert info.value.status_code == 409 and info.value.param == "keys.ci.squad"


def test_endpoint_named_by_a_setting_cannot_be_deleted() -> None:
    doc = put_endpoint(org(), "vllm", "https://vllm.example/v1", None, 1.0)
    doc = msgspec.structs.replace(doc, settings=msgspec.convert({"fallbacks": ["custom:vllm:llama"]}, ScopeSettings))
    with pytest.raises(AdminError) as info:
        remove_endpoint(doc, "vllm")
    assert info.value.status_code == 409 and info.value.param == "settings.fallbacks"


@pytest.mark.parametrize("field", ["reroutes", *FALLBACK_MAPS])
def test_every_setting_that_makes_custom_targets_keeps_its_endpoint(field: str) -> None:
    """Each setting `identity_of` turns into custom targets blocks the endpoint's deletion, at
    every scope; a setting naming another endpoint does not."""
    doc = put_endpoint(org(), "vllm", "https://vllm.example/v1", None, 1.0)
    value = ["custom:vllm:llama"] if field == "reroutes" else {"m1": ["custom:vllm:llama"]}
    named = msgspec.convert({field: value}, ScopeSettings)
    scoped = {
        "settings": msgspec.structs.replace(doc, settings=named),
        "keys.ci.settings": msgspec.structs.replace(
            doc, keys={**doc.keys, "ci": msgspec.structs.replace(doc.keys["ci"], settings=named)}
        ),
    }
    for path, edited in scoped.items():
        with pytest.raises(AdminError) as info:
            remove_endpoint(edited, "vllm")
        assert info.value.status_code == 409 and info.value.param == f"{path}.{field}"
    other = msgspec.convert(
        {field: ["custom:other:llama"] if field == "reroutes" else {"m1": ["custom:other:x"]}}, ScopeSettings
    )
    assert "vllm" not in remove_endpoint(msgspec.structs.replace(doc, settings=other), "vllm").custom_endpoints


def test_settings_patch_sets_replaces_and_inherits_with_null() -> None:
    current = msgspec.convert({"reroutes": ["m1"], "key_mode": "own_only"}, ScopeSettings)
    patched = settings_patch(current, b'{"reroutes": null, "fallbacks": ["m2"]}', "settings")
    assert msgspec.to_builtins(patched) == {"fallbacks": ["m2"], "key_mode": "own_only"}
    with pytest.raises(AdminError) as info:
        settings_patch(current, b'{"reroutes": 5}', "settings")
    assert info.value.param == "settings.reroutes"
    with pytest.raises(AdminError) as info:
        settings_patch(current, b'{"strategy": {}}', "settings")
    assert info.value.param == "settings.strategy"


def test_decode_names_the_nested_path_of_a_bad_field() -> None:
    with pytest.raises(AdminError) as info:
        decode(b'{"name": "x", "settings": {"key_mode": "byok"}}', KeyCreate)
    assert info.value.param == "settings.key_mode" and info.value.status_code == 400
    with pytest.raises(AdminError) as info:
        decode(b'{"name": "x", "extra": 1}', KeyCreate)
    assert info.value.param == "extra"
    with pytest.raises(AdminError) as info:
        decode(b"{not json", KeyCreate)
    assert info.value.param == "body"
    with pytest.raises(AdminError) as info:
        decode(b'{"name": "k\\ud800"}', KeyCreate)
    assert info.value.param == "body" and "lone UTF-16 surrogate" in str(info.value), str(info.value)


def test_views_mask_secrets_and_rotation_reseals_every_one() -> None:
    old_key, new_key = generate_key(), generate_key()
    vault = Vault([old_key])
    byok, ep = provider_key_binding(org().id, "openai"), endpoint_binding(org().id, "vllm")
    doc = put_provider_key(org(), "openai", vault.seal("sk-canary-aaaabbbbccccdddd", byok), 1.0)
    legacy = Sealed(token=Fernet(old_key.encode()).encrypt(b"ep-canary-11112222").decode(), tail="2222")
    doc = put_endpoint(doc, "vllm", "https://vllm.example/v1", legacy, 1.0)  # sealed before binding
    doc = put_endpoint(doc, "open", "https://open.example/v1", None, 1.0)
    text = msgspec.json.encode(org_view(doc, 2.0)).decode()
    assert "sk-canary-aaaabbbbccccdddd" not in text and "ep-canary-11112222" not in text
    assert "…dddd" in text and "…2222" in text
    new_vault = Vault([new_key])
    both = Vault.from_env({"TURNOUT_SECRET_KEY": f"{new_key},{old_key}"})
    rotated, count = rotate_secrets(doc, both)
    assert count == 2
    assert new_vault.open(rotated.provider_keys["openai"].secret, byok) == "sk-canary-aaaabbbbccccdddd"
    endpoint = rotated.custom_endpoints["vllm"]
    assert isinstance(endpoint, EndpointDoc) and endpoint.secret is not None
    assert new_vault.open(endpoint.secret, ep) == "ep-canary-11112222"  # migrated: bound where it was stored


@pytest.mark.parametrize("ttl_s", [1e300, 1e12, float("inf"), 0.0, -5.0])
def test_a_key_lifetime_out_of_range_is_refused_naming_ttl_s(ttl_s: float) -> None:
    from turnout.stored.orgs import OrgDoc
    from turnout.tenancy.admin import AdminError, KeyCreate, add_key

    with pytest.raises(AdminError) as info:
        add_key(OrgDoc(id="acme"), KeyCreate(name="k", ttl_s=ttl_s), "tk-secret-000000001", 1_700_000_000.0)
    assert (info.value.status_code, info.value.param) == (400, "ttl_s")


@pytest.mark.parametrize("expires_at", [1e300, 99999999999999, "10000-01-01T00:00:00Z", -1])
def test_an_expiry_out_of_range_is_refused_naming_expires_at(expires_at: object) -> None:
    from turnout.tenancy.admin import AdminError, parse_when

    with pytest.raises(AdminError) as info:
        parse_when(expires_at, "expires_at")  # type: ignore[arg-type]
    assert "expires_at" in str(info.value)


def test_a_stored_time_out_of_range_is_still_shown() -> None:
    from turnout.tenancy.views import iso

    assert iso(1e300) == "9999-12-31T23:59:59Z"
    assert iso(-5.0) == "1970-01-01T00:00:00Z"


# (body, param, words) of settings whose policy value is outside its domain
OUT_OF_DOMAIN = [
    (b'{"policy": {"retry": {"max_retries": -1}}}', "settings.policy.retry.max_retries", "Expected `int` >= 0"),
    (b'{"policy": {"retry": {"ttft_timeout_ms": -5}}}', "settings.policy.retry.ttft_timeout_ms", ">= 0"),
    (b'{"policy": {"retry": {"base_ms": -250}}}', "settings.policy.retry.base_ms", ">= 0"),
    (b'{"policy": {"budget": {"max_attempts": 0}}}', "settings.policy.budget.max_attempts", "Expected `int` >= 1"),
    (b'{"policy": {"fallback": {"max_cycles": -2}}}', "settings.policy.fallback.max_cycles", ">= 1"),
    (b'{"policy": {"plan": {"max_offers": 0}}}', "settings.policy.plan.max_offers", ">= 1"),
    (b'{"policy": {"fallback": {"on_exhausted": "first"}}}', "settings.policy.fallback.on_exhausted", "Invalid enum"),
    (
        b'{"policy": {"pinned": {"allow_other_providers": 1}}}',
        "settings.policy.pinned.allow_other_providers",
        "Expected true or false, got a whole number",
    ),
    (b'{"budget": {"usd": -1, "period": "day"}}', "settings.budget.usd", "Expected `float` > 0.0"),
]


@pytest.mark.parametrize(("body", "param", "words"), OUT_OF_DOMAIN, ids=[p for _, p, _ in OUT_OF_DOMAIN])
def test_a_setting_outside_its_domain_is_refused_naming_it_by_put_and_patch(
    body: bytes, param: str, words: str
) -> None:
    current = msgspec.convert({"reroutes": ["m1"]}, ScopeSettings)
    writes: list[Callable[[], ScopeSettings]] = [
        lambda: decode(body, ScopeSettings, "settings"),  # PUT
        lambda: settings_patch(current, body, "settings"),  # PATCH
    ]
    for write in writes:
        with pytest.raises(AdminError) as info:
            write()
        assert (info.value.status_code, info.value.param) == (400, param)
        assert info.value.message.startswith(f"{param}: ") and words in info.value.message


@pytest.mark.parametrize(
    ("body", "param", "number"),
    [
        (b'{"budget": {"usd": 1e309, "period": "day"}}', "settings.budget.usd", "1e309"),
        (b'{"limits": {"rpm": ' + b"9" * 5000 + b"}}", "settings.limits.rpm", "5000 characters"),
        (b'{"fallbacks": {"a b": [1e999]}}', 'settings.fallbacks["a b"][0]', "1e999"),
    ],
    ids=["float", "integer", "odd-key"],
)
def test_a_number_out_of_range_is_refused_naming_its_field_by_put_and_patch(
    body: bytes, param: str, number: str
) -> None:
    writes: list[Callable[[], ScopeSettings]] = [
        lambda: decode(body, ScopeSettings, "settings"),  # PUT
        lambda: settings_patch(ScopeSettings(), body, "settings"),  # PATCH
    ]
    for write in writes:
        with pytest.raises(AdminError) as info:
            write()
        assert (info.value.status_code, info.value.param) == (400, param)
        assert "out of range" in info.value.message and number in info.value.message


class _Pick(msgspec.Struct, forbid_unknown_fields=True):
    period: Literal["day", "month"] = "day"


def test_decode_lists_the_values_of_an_enum_it_refuses() -> None:
    with pytest.raises(AdminError) as info:
        decode(b'{"period": "week"}', _Pick, "settings.budget")
    assert info.value.param == "settings.budget.period"
    assert str(info.value.message).endswith("Invalid enum value 'week' (one of day, month)")
