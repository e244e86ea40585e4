"""`gemini` and `vertex` providers in the configuration (README "Providers: Gemini and Vertex
AI"): Vertex AI's `project`, `location` and `credentials_file` required there and refused on
other kinds, each named by its path; base URLs without the path the family adds; the stored
catalog, the admin CLI and `turnout config check` (an unreadable or invalid key file named);
a tenant's own Gemini key replacing only the key; a service-account file as a platform
credential."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from support.google_keys import write_key_file
from turnout.catalog import Catalog
from turnout.catalog.doc import config_of, doc_from_config, file_digest, same_catalog
from turnout.config import ProviderConfig, ProviderKind, has_shared_credential, parse_config
from turnout.core.credentials import Credential
from turnout.core.policy import Policy
from turnout.core.types import Target
from turnout.errors import ConfigError
from turnout.rules.google_fields import check_credentials_file
from turnout.rules.ssrf import AllowList
from turnout.stored.catalog import doc_encoder
from turnout.stored.orgs import OrgDoc, ProviderKeyDoc
from turnout.tenancy.byok import resolve_call
from turnout.tenancy.orgs import validate_org
from turnout.vault import Sealed, Vault, generate_key
from turnout_cli.admin import _request
from turnout_cli.admin_catalog import KINDS
from turnout_cli.main import build_parser, main

VERTEX = "project: my-proj, location: us-central1, credentials_file: /secrets/sa.json"
TEXT = """
providers:
  gemini: {kind: gemini, base_url: https://generativelanguage.googleapis.com, api_key: AIza-key-1}
  vertex: {kind: vertex, base_url: https://us-central1-aiplatform.googleapis.com, VERTEX}
models:
  flash: {offers: [{provider: gemini, model: gemini-2.5-flash}, {provider: vertex, model: gemini-2.5-flash}]}
  sonnet: {offers: [{provider: vertex, model: claude-sonnet-4@20250514}]}
"""


def _config(vertex: str = VERTEX, text: str = TEXT) -> Any:
    return parse_config(text.replace("VERTEX", vertex), env={})


def test_the_google_kinds_take_their_fields() -> None:
    config = _config()
    vertex = config.raw.providers["vertex"]
    assert (vertex.project, vertex.location, vertex.credentials_file) == ("my-proj", "us-central1", "/secrets/sa.json")
    assert vertex.api_key is None and has_shared_credential(vertex)
    assert Catalog(config).keyed_providers == frozenset({"gemini", "vertex"})


@pytest.mark.parametrize(
    ("vertex", "words"),
    [
        (
            "location: us-central1, credentials_file: /sa.json",
            "providers.vertex.project: a `vertex` provider needs its project",
        ),
        ("project: my-proj, credentials_file: /sa.json", "providers.vertex.location: a `vertex` provider needs"),
        ("project: my-proj, location: us-central1", "providers.vertex.credentials_file: a `vertex` provider needs"),
        (
            "project: My_Proj, location: us-central1, credentials_file: /sa.json",
            "providers.vertex.project: 'My_Proj' is not a Google Cloud project id",
        ),
        (
            "project: my-proj, location: us central1, credentials_file: /sa.json",
            "providers.vertex.location: 'us central1' is not a Vertex AI location",
        ),
        (
            "project: my-proj, location: us-central1, credentials_file: relative/sa.json",
            "providers.vertex.credentials_file: an absolute path",
        ),
        (
            "project: my-proj, location: europe-west4, credentials_file: /sa.json",
            "providers.vertex.location: 'europe-west4' is not the location of base_url",
        ),
    ],
    ids=["project", "location", "credentials_file", "bad-project", "bad-location", "relative-file", "other-location"],
)
def test_a_vertex_provider_without_a_valid_field_is_refused_naming_it(vertex: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        _config(vertex)


@pytest.mark.parametrize("field", ["project: p-1234", "location: us-central1", "credentials_file: /sa.json"])
def test_a_google_field_on_another_kind_is_refused_naming_it(field: str) -> None:
    text = TEXT.replace("api_key: AIza-key-1}", f"api_key: AIza-key-1, {field}}}")
    name = field.split(":")[0]
    with pytest.raises(ConfigError, match=rf"providers\.gemini\.{name}: only a `vertex` provider takes a {name}"):
        _config(text=text)


@pytest.mark.parametrize(
    ("provider", "base_url"),
    [
        ("gemini", "https://generativelanguage.googleapis.com/v1beta"),
        ("gemini", "https://generativelanguage.googleapis.com/v1/"),
        ("vertex", "https://us-central1-aiplatform.googleapis.com/v1"),
        ("vertex", "https://x.example/projects/my-proj"),
    ],
)
def test_a_base_url_holding_the_path_the_family_adds_is_refused(provider: str, base_url: str) -> None:
    text = TEXT.replace(
        "https://generativelanguage.googleapis.com,"
        if provider == "gemini"
        else "https://us-central1-aiplatform.googleapis.com,",
        f"{base_url},",
    )
    with pytest.raises(ConfigError, match=rf"providers\.{provider}\.base_url"):
        _config(text=text)


def test_the_stored_catalog_keeps_the_fields_and_a_changed_one_is_a_new_catalog() -> None:
    config = _config()
    vault = Vault([generate_key()])
    doc = doc_from_config(config, vault)
    stored = msgspec.json.decode(doc_encoder.encode(doc))["providers"]
    assert stored["vertex"] == {
        "kind": "vertex",
        "base_url": "https://us-central1-aiplatform.googleapis.com",
        "project": "my-proj",
        "location": "us-central1",
        "credentials_file": "/secrets/sa.json",
    }
    assert set(stored["gemini"]) == {"kind", "base_url", "key"}  # defaults omitted
    assert same_catalog(doc, config)
    moved = _config(VERTEX.replace("us-central1", "europe-west4"), text=TEXT.replace("us-central1", "europe-west4"))
    assert not same_catalog(doc, moved) and file_digest(moved) != file_digest(config)
    assert config_of(doc, config, {}, vault).raw.providers["vertex"] == config.raw.providers["vertex"]


def test_a_tenants_own_gemini_key_replaces_only_the_key() -> None:
    class Tenant:
        own_providers = frozenset({"gemini"})

        def own_key(self, provider: str) -> str | None:
            return "AIza-tenant" if provider == "gemini" else None

        def endpoint(self, provider: str) -> ProviderConfig | None:
            return None

    target = Target(provider="gemini", model="gemini-2.5-flash", catalog_model="flash")
    call = resolve_call(Catalog(_config()), Tenant(), target, key_mode="own_then_shared", policy=Policy())
    assert call is not None and call.credential is Credential.OWN
    assert call.provider == ProviderConfig(
        kind="gemini", base_url="https://generativelanguage.googleapis.com", api_key="AIza-tenant"
    )
    shared = resolve_call(
        Catalog(_config()),
        None,
        Target(provider="vertex", model="m", catalog_model="flash"),
        key_mode="own_then_shared",
        policy=Policy(),
    )
    assert shared is not None and shared.credential is Credential.SHARED  # the service account serves


def test_the_admin_cli_sends_the_vertex_fields_and_knows_every_kind() -> None:
    argv = [
        "catalog",
        "set-provider",
        "vx",
        "--kind",
        "vertex",
        "--base-url",
        "https://us-central1-aiplatform.googleapis.com",
    ]
    extra = ["--project", "my-proj", "--location", "us-central1", "--credentials-file", "/secrets/sa.json"]
    args = build_parser().parse_args(["admin", "--key", "k", *argv, *extra])
    assert _request(args) == (
        "PUT",
        "/catalog/providers/vx",
        {
            "kind": "vertex",
            "base_url": "https://us-central1-aiplatform.googleapis.com",
            "project": "my-proj",
            "location": "us-central1",
            "credentials_file": "/secrets/sa.json",
        },
    )
    assert set(KINDS) == set(get_args(ProviderKind))


def test_a_worker_names_each_vertex_key_file_it_cannot_use(tmp_path: Path) -> None:
    from turnout.rules.google_fields import unusable_key_files

    key = write_key_file(tmp_path / "sa.json", "https://oauth2.googleapis.com/token")
    assert unusable_key_files(_config(VERTEX.replace("/secrets/sa.json", str(key))).raw.providers) == []
    missing = tmp_path / "missing.json"
    assert unusable_key_files(_config(VERTEX.replace("/secrets/sa.json", str(missing))).raw.providers) == [
        f"providers.vertex.credentials_file: {missing}: cannot be read (FileNotFoundError)"
    ]


def test_config_check_names_an_unreadable_or_invalid_credentials_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "turnout.yaml"
    missing = tmp_path / "missing.json"
    path.write_text(TEXT.replace("VERTEX", VERTEX.replace("/secrets/sa.json", str(missing))))
    assert main(["config", "check", str(path)]) == 1
    assert (
        f"providers.vertex.credentials_file: {missing}: cannot be read (FileNotFoundError)" in capsys.readouterr().err
    )
    key = write_key_file(tmp_path / "sa.json", "https://oauth2.googleapis.com/token")
    path.write_text(TEXT.replace("VERTEX", VERTEX.replace("/secrets/sa.json", str(key))))
    assert main(["config", "check", str(path)]) == 0


def test_config_check_names_the_credentials_file_beside_the_files_other_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every error at once: a file with another error (an offer naming an unknown provider)
    still has its vertex key file read and named."""
    path = tmp_path / "turnout.yaml"
    missing = tmp_path / "missing.json"
    broken = TEXT.replace("VERTEX", VERTEX.replace("/secrets/sa.json", str(missing)))
    path.write_text(broken + "  other: {offers: [{provider: nowhere, model: x}]}\n")
    assert main(["config", "check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "2 error(s)" in err and "unknown provider 'nowhere'" in err
    assert f"providers.vertex.credentials_file: {missing}: cannot be read (FileNotFoundError)" in err


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("not json", "is not JSON"),
        ('{"type": "authorized_user"}', 'is not a service-account key file ("type": "service_account")'),
        ('{"type": "service_account", "client_email": "a@b"}', "lacks private_key, token_uri"),
    ],
)
def test_an_invalid_key_file_is_named_with_why(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "sa.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as refused:
        check_credentials_file("providers.v.credentials_file", str(path))
    assert str(refused.value).startswith(f"providers.v.credentials_file: {path}: ") and words in str(refused.value)


def test_a_key_for_a_vertex_provider_is_refused_naming_it() -> None:
    with pytest.raises(
        ConfigError, match=r"providers\.vertex\.api_key: a `vertex` provider's credential is its service"
    ):
        _config(VERTEX + ", api_key: x-key-0001")
    text = TEXT + "orgs:\n  acme:\n    provider_keys: {vertex: own-key-0001}\n"
    with pytest.raises(ConfigError, match=r"orgs\.acme\.provider_keys\.vertex: a `vertex` provider's credential"):
        _config(text=text)


def test_an_org_key_for_a_vertex_provider_is_refused_by_the_admin_api_check() -> None:
    gemini_key = ProviderKeyDoc(secret=Sealed(token="t", tail=""))
    validate_org(OrgDoc(id="acme", provider_keys={"gemini": gemini_key}), _config(), AllowList())
    with pytest.raises(ConfigError, match=r"^provider_keys\.vertex: a `vertex` provider's credential"):
        validate_org(OrgDoc(id="acme", provider_keys={"vertex": gemini_key}), _config(), AllowList())
