"""The configuration rules of a `bedrock` provider's own fields (pure).

Owns: `check_fields` and `check_key` (what `turnout config check`, a file load and an admin edit refuse, each
naming its path: `providers.<name>.region`, `.access_key_id`, `.secret_access_key`,
`.session_token`, `.api_key`) and `folded_key` (the file's three key fields as the one Bedrock
key, `turnout.aws.keys`, that the provider's `api_key` carries from then on). The checks read a
provider through `AwsFields`, so this module needs no import of `turnout.config`.
Must not import: `turnout.config`, `turnout.adapters`, services, FastAPI, arq, httpx, botocore.

Sources: https://docs.aws.amazon.com/general/latest/gr/bedrock.html (regions and the runtime
endpoint `https://bedrock-runtime.{region}.amazonaws.com`),
https://docs.aws.amazon.com/IAM/latest/APIReference/API_AccessKey.html (an access key id: 16 to
128 word characters).
"""

from __future__ import annotations

import re
from typing import Final, Protocol
from urllib.parse import urlsplit

from turnout.aws.keys import KEY_FORM, join_key, split_key
from turnout.errors import ConfigError

KIND: Final = "bedrock"
"""The provider kind these fields belong to."""
FIELDS: Final = ("region", "access_key_id", "secret_access_key", "session_token")
"""The fields only a `bedrock` provider takes."""
REGION: Final = re.compile(r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}")
"""An AWS region name (`us-east-1`, `us-gov-west-1`, `ap-southeast-2`)."""
RUNTIME_HOST: Final = re.compile(
    r"(?:vpce-[a-z0-9-]+\.)?bedrock-runtime(?:-fips)?\.(?P<region>[a-z0-9-]+)\.(?:vpce\.)?amazonaws\.com(?:\.cn)?"
)
"""The host of an AWS Bedrock runtime endpoint, naming its region: the public one
(`bedrock-runtime.us-east-1.amazonaws.com`, `-fips`, `.cn`) or an interface VPC endpoint's
(`vpce-0abc-xyz.bedrock-runtime.us-east-1.vpce.amazonaws.com`)."""
ACCESS_KEY_ID: Final = re.compile(r"[A-Za-z0-9]{16,128}")
"""An AWS access key id (`AKIA...`, `ASIA...`)."""


class AwsFields(Protocol):
    """What the rules read of a provider (`turnout.config.ProviderConfig` has it)."""

    @property
    def kind(self) -> str:
        """The provider kind."""
        ...

    @property
    def base_url(self) -> str:
        """The API root."""
        ...

    @property
    def api_key(self) -> str | None:
        """The provider's key (for `bedrock`: a Bedrock key, once folded)."""
        ...

    @property
    def region(self) -> str | None:
        """The AWS region."""
        ...

    @property
    def access_key_id(self) -> str | None:
        """The access key id (before folding)."""
        ...

    @property
    def secret_access_key(self) -> str | None:
        """The secret access key (before folding)."""
        ...

    @property
    def session_token(self) -> str | None:
        """The session token (before folding)."""
        ...


def folded_key(path: str, provider: AwsFields) -> str | None:
    """The Bedrock key of a provider's `access_key_id` / `secret_access_key` / `session_token`
    (`join_key`), or None when it gives none of them (its `api_key`, if any, stays).

    Raises:
        ConfigError: one key field without the other (`{path}.secret_access_key: given without
            access_key_id`), a session token without keys, or the fields beside an `api_key`.
    """
    akid, secret, token = provider.access_key_id, provider.secret_access_key, provider.session_token
    if not (akid or secret or token):
        return None
    if provider.kind != KIND:
        return None  # `check_fields` names the field
    if provider.api_key:
        raise ConfigError(
            f"{path}.api_key: a bedrock provider gives access_key_id and secret_access_key, not also an api_key"
        )
    if not akid or not secret:
        given, missing = ("access_key_id", "secret_access_key") if akid else ("secret_access_key", "access_key_id")
        if not akid and not secret:
            given, missing = "session_token", "access_key_id and secret_access_key"
        raise ConfigError(f"{path}.{given}: given without {missing} (both, or neither for the credential chain)")
    if not ACCESS_KEY_ID.fullmatch(akid):
        raise ConfigError(f"{path}.access_key_id: not an AWS access key id (16 to 128 letters and digits)")
    for name, value in (("secret_access_key", secret), ("session_token", token)):
        if value is not None and (":" in value or not value.strip() or value.strip() != value):
            raise ConfigError(f"{path}.{name}: not an AWS {name.replace('_', ' ')} (no spaces or `:`)")
    return join_key(akid, secret, token)


def check_key(path: str, kind: str, key: str) -> None:
    """A key of a `bedrock` provider (the provider's own, or an org's in `provider_keys`) is of
    `join_key`'s form; a key of another kind is not this module's.

    Raises:
        ConfigError: `{path}: a bedrock provider's key is ACCESS_KEY_ID:SECRET_ACCESS_KEY...`.
    """
    if kind != KIND:
        return
    try:
        split_key(key)
    except ValueError:
        raise ConfigError(f"{path}: a bedrock provider's key is {KEY_FORM}") from None


def check_fields(path: str, provider: AwsFields) -> None:
    """The rules of the `bedrock` fields: refused on another kind; for `bedrock`, `region` required,
    of AWS's form and, with an AWS runtime endpoint as `base_url`, the endpoint's region, the key (if any) of `join_key`'s form, the keys' fields folded already
    (`folded_key`), and a `base_url` that is the runtime endpoint (no `/model/...` path).

    Raises:
        ConfigError: the message names the field's path (never a key's value).
    """
    if provider.kind != KIND:
        for name in FIELDS:
            if getattr(provider, name) is not None:
                raise ConfigError(
                    f"{path}.{name}: only a `bedrock` provider takes a {name}, this one is `{provider.kind}`"
                )
        return
    if not provider.region:
        raise ConfigError(f"{path}.region: a `bedrock` provider needs its AWS region (region: us-east-1)")
    if not REGION.fullmatch(provider.region):
        raise ConfigError(f"{path}.region: {provider.region!r} is not an AWS region such as us-east-1")
    folded_key(path, provider)  # the pairing rules, for a provider built without folding (an admin edit)
    if provider.api_key:
        check_key(f"{path}.api_key", provider.kind, provider.api_key)
    endpoint = RUNTIME_HOST.fullmatch(urlsplit(provider.base_url).hostname or "")
    if endpoint is not None and endpoint["region"] != provider.region:
        raise ConfigError(  # AWS would refuse every call: a signature scoped to another region (403)
            f"{path}.region: {provider.region!r} is not the region of base_url ({endpoint['region']}); "
            "a call is signed for the endpoint's region"
        )
    if re.search(r"/model(?:/|$)", provider.base_url.split("?", 1)[0].rstrip("/")):
        raise ConfigError(
            f"{path}.base_url: a `bedrock` base_url is the runtime endpoint without /model "
            "(https://bedrock-runtime.us-east-1.amazonaws.com)"
        )
