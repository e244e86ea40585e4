"""`turnout admin catalog ...`: the catalog admin API from the command line (operator key).

    turnout admin catalog get
    turnout admin catalog set-model ID JSON              add or replace a model (JSON as in the file)
    turnout admin catalog delete-model ID
    turnout admin catalog set-provider NAME --kind K --base-url URL [--api-version V] [--region R]
        [--project P --location L --credentials-file F] [--auth-header H [--auth-scheme S]]
        [--with-key | --key-env VAR | --no-key]
    turnout admin catalog delete-provider NAME

`set-provider --with-key` reads the key from one line of standard input (it
is sealed by the ingress; never from argv); `--key-env VAR` stores a
reference: every process reads its own `$VAR`; with neither, the provider
keeps its current key; `--no-key` removes it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

P = "/catalog"
KINDS = ["openai", "openai_compatible", "anthropic", "azure_openai", "bedrock", "gemini", "vertex"]
"""`--kind` choices: `turnout.config.ProviderKind` (a test checks they are the same)."""


def request(args: argparse.Namespace, secret: Callable[[argparse.Namespace], str]) -> tuple[str, str, Any]:
    """(method, path under /admin/v1, JSON body) of one `catalog` command; `secret` reads a key from stdin."""
    action = args.action
    if action == "get":
        return "GET", P, None
    if action == "delete-model":
        return "DELETE", f"{P}/models/{quote(args.id, safe='')}", None
    if action == "delete-provider":
        return "DELETE", f"{P}/providers/{args.name}", None
    if action == "set-model":
        try:
            return "PUT", f"{P}/models/{quote(args.id, safe='')}", json.loads(args.json)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"turnout admin: the model is not valid JSON: {exc}") from None
    body: dict[str, Any] = {"kind": args.kind, "base_url": args.base_url}
    for field in ("api_version", "region", "project", "location", "credentials_file"):
        if getattr(args, field) is not None:
            body[field] = getattr(args, field)
    if args.auth_header is not None:
        body["auth"] = {"header": args.auth_header, "scheme": args.auth_scheme}
    if args.key_env:
        body["api_key_env"] = args.key_env
    elif args.with_key:
        body["api_key"] = secret(argparse.Namespace(api_key_env=None))
    elif args.no_key:
        body["api_key"] = None
    return "PUT", f"{P}/providers/{args.name}", body


def add_parser(
    res: argparse._SubParsersAction[argparse.ArgumentParser], func: Callable[[argparse.Namespace], int]
) -> None:
    """Register `catalog` under `turnout admin`, each action calling `func`."""
    parser = res.add_parser("catalog", help="models and providers (operator key)")
    acts = parser.add_subparsers(dest="action", required=True)
    spec = {
        "get": [],
        "set-model": ["id", "json"],
        "delete-model": ["id"],
        "set-provider": ["name"],
        "delete-provider": ["name"],
    }
    out = {}
    for action, positionals in spec.items():
        a = acts.add_parser(action, allow_abbrev=False)
        for positional in positionals:
            a.add_argument(positional)
        a.set_defaults(func=func, resource="catalog")
        out[action] = a
    provider = out["set-provider"]
    provider.add_argument("--kind", required=True, choices=KINDS)
    provider.add_argument("--base-url", required=True)
    provider.add_argument("--api-version", help="the API version an azure_openai provider's requests name (2024-10-21)")
    provider.add_argument("--project", help="a vertex provider's Google Cloud project id")
    provider.add_argument("--location", help="a vertex provider's Vertex AI location (us-central1)")
    provider.add_argument(
        "--credentials-file", help="a vertex provider's service-account key file (its path on every process's disk)"
    )
    provider.add_argument("--auth-header", help="the header an openai_compatible provider takes its key in (api-key)")
    provider.add_argument(
        "--auth-scheme",
        default="Bearer",
        help='the word before the key in --auth-header (default Bearer, as in the file; "" sends the key alone)',
    )
    provider.add_argument(
        "--region",
        help="a bedrock provider's AWS region (us-east-1); its key on stdin with --with-key "
        "is ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN], no key: the credential chain",
    )
    key = provider.add_mutually_exclusive_group()
    key.add_argument("--with-key", action="store_true", help="read the provider's key from stdin (stored sealed)")
    key.add_argument("--key-env", help="every process reads the key from this environment variable")
    key.add_argument("--no-key", action="store_true", help="remove the provider's key")
