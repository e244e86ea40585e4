"""`turnout admin ...`: the tenancy admin API from the command line (SPEC §6).

    turnout admin gen-secret-key                      print a new TURNOUT_SECRET_KEY value
    turnout admin rotate-secrets                      re-encrypt every stored secret (operator key)
    turnout admin orgs list | get ORG | create ORG [--settings JSON] | delete ORG
    turnout admin squads list ORG | get ORG NAME | create ORG NAME [--settings JSON] | delete ORG NAME
    turnout admin keys list ORG | get ORG NAME | effective ORG NAME | revoke ORG NAME | delete ORG NAME
    turnout admin keys create ORG NAME [--squad S] [--admin] [--ttl-s N | --expires-at T] [--settings JSON]
    turnout admin keys update ORG NAME [--squad S | --no-squad] [--admin | --no-admin] [--expires-at T | --no-expiry]
    turnout admin settings get|set|replace ORG [--squad S | --key K] [JSON]
    turnout admin provider-keys list ORG | set ORG PROVIDER | delete ORG PROVIDER
    turnout admin endpoints list ORG | get ORG ID | set ORG ID --base-url URL | delete ORG ID
    turnout admin catalog get | set-model ID JSON | delete-model ID | set-provider NAME ... | delete-provider NAME
                                                      models and providers (operator key; `admin_catalog`)

Every command but `gen-secret-key` calls a running ingress (`--url`, default
`$TURNOUT_URL` or http://127.0.0.1:8080) with `--key` (default
`$TURNOUT_ADMIN_KEY`, else `$TURNOUT_OPERATOR_KEY`) and prints the JSON
answer. Secrets are never taken from the command line (it shows in `ps`):
`provider-keys set` and `endpoints set --with-key` read the key from
`--api-key-env VAR` or, by default, one line of standard input.
`settings set` merges (null = inherit); `settings replace` replaces the scope.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from turnout_cli import admin_catalog
from turnout_cli.arg_types import api_key, ingress_url

DEFAULT_URL = "http://127.0.0.1:8080"


def cmd_gen_secret_key(args: argparse.Namespace) -> int:
    """Print a new key for `TURNOUT_SECRET_KEY` (32 random bytes, URL-safe base64)."""
    from turnout.vault import generate_key

    print(generate_key())
    return 0


def _settings_arg(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"turnout admin: the settings are not valid JSON: {exc}") from None


def _secret(args: argparse.Namespace) -> str:
    if args.api_key_env:
        value = os.environ.get(args.api_key_env, "")
        if not value:
            raise SystemExit(f"turnout admin: ${args.api_key_env} is empty or unset")
        return value
    if sys.stdin.isatty():
        print("API key (one line): ", end="", file=sys.stderr, flush=True)
        return sys.stdin.readline().strip()
    lines = [line.strip() for line in sys.stdin.read().splitlines() if line.strip()]
    if len(lines) != 1:  # a key is one line: more would have been cut to the first, silently (never shown)
        raise SystemExit(f"turnout admin: standard input must hold the key alone on one line; it holds {len(lines)}")
    return lines[0]


def _with_settings(body: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    settings = getattr(args, "settings", None)
    return {**body, "settings": _settings_arg(settings)} if settings else body


def _request(args: argparse.Namespace) -> tuple[str, str, Any]:
    """(method, path under /admin/v1, JSON body) of one command."""
    what, action = args.resource, args.action
    if what == "catalog":
        return admin_catalog.request(args, _secret)
    org = f"/orgs/{getattr(args, 'org', '')}"
    name = getattr(args, "name", None)
    simple: dict[tuple[str, str], tuple[str, str]] = {
        ("orgs", "list"): ("GET", "/orgs"),
        ("orgs", "get"): ("GET", org),
        ("orgs", "delete"): ("DELETE", org),
        ("squads", "list"): ("GET", f"{org}/squads"),
        ("squads", "get"): ("GET", f"{org}/squads/{name}"),
        ("squads", "delete"): ("DELETE", f"{org}/squads/{name}"),
        ("keys", "list"): ("GET", f"{org}/keys"),
        ("keys", "get"): ("GET", f"{org}/keys/{name}"),
        ("keys", "effective"): ("GET", f"{org}/keys/{name}/effective"),
        ("keys", "revoke"): ("POST", f"{org}/keys/{name}/revoke"),
        ("keys", "delete"): ("DELETE", f"{org}/keys/{name}"),
        ("provider-keys", "list"): ("GET", f"{org}/provider-keys"),
        ("provider-keys", "delete"): ("DELETE", f"{org}/provider-keys/{getattr(args, 'provider', '')}"),
        ("endpoints", "list"): ("GET", f"{org}/custom-endpoints"),
        ("endpoints", "get"): ("GET", f"{org}/custom-endpoints/{name}"),
        ("endpoints", "delete"): ("DELETE", f"{org}/custom-endpoints/{name}"),
        ("rotate-secrets", "rotate"): ("POST", "/secrets/rotate"),
    }
    if (what, action) in simple:
        method, path = simple[(what, action)]
        return method, path, None
    if what == "spend":
        query = f"?period={args.period}" + (f"&at={args.at}" if args.at else "")
        return "GET", f"{org}/spend{query}", None
    if what == "orgs":
        return "POST", "/orgs", _with_settings({"id": args.org}, args)
    if what == "squads":
        return "POST", f"{org}/squads", _with_settings({"name": name}, args)
    if what == "keys" and action == "create":
        body: dict[str, Any] = {"name": name, "admin": args.admin, "squad": args.squad}
        if args.ttl_s is not None:
            body["ttl_s"] = args.ttl_s
        if args.expires_at:
            body["expires_at"] = args.expires_at
        return "POST", f"{org}/keys", _with_settings(body, args)
    if what == "keys":
        patch: dict[str, Any] = {}
        if args.squad is not None or args.no_squad:
            patch["squad"] = None if args.no_squad else args.squad
        if args.admin is not None:
            patch["admin"] = args.admin
        if args.expires_at is not None or args.no_expiry:
            patch["expires_at"] = None if args.no_expiry else args.expires_at
        return "PATCH", f"{org}/keys/{name}", patch
    if what == "settings":
        scope = (
            f"{org}/squads/{args.squad}" if args.squad else (f"{org}/keys/{args.key_name}" if args.key_name else org)
        )
        method = {"get": "GET", "set": "PATCH", "replace": "PUT"}[action]
        return method, f"{scope}/settings", None if action == "get" else _settings_arg(args.json)
    if what == "provider-keys":
        return "PUT", f"{org}/provider-keys/{args.provider}", {"api_key": _secret(args)}
    endpoint: dict[str, Any] = {"base_url": args.base_url}
    if args.with_key or args.api_key_env:
        endpoint["api_key"] = _secret(args)
    return "PUT", f"{org}/custom-endpoints/{name}", endpoint


def cmd_admin(args: argparse.Namespace) -> int:
    """Call the admin API; print the JSON answer. 0 on 2xx, 1 on an error answer, 2 on no answer."""
    import httpx

    key = args.key or os.environ.get("TURNOUT_ADMIN_KEY") or os.environ.get("TURNOUT_OPERATOR_KEY")
    if not key:
        print("turnout admin: a key is needed (--key, $TURNOUT_ADMIN_KEY or $TURNOUT_OPERATOR_KEY)", file=sys.stderr)
        return 2
    if not args.key:  # from the environment: checked as --key is
        try:
            api_key(key)
        except argparse.ArgumentTypeError as exc:
            print(f"turnout admin: $TURNOUT_ADMIN_KEY / $TURNOUT_OPERATOR_KEY: {exc}", file=sys.stderr)
            return 2
    method, path, body = _request(args)
    url = args.url.rstrip("/") + "/admin/v1" + path
    try:
        response = httpx.request(method, url, json=body, headers={"authorization": f"Bearer {key}"}, timeout=30)
    except httpx.HTTPError as exc:
        print(f"turnout admin: {url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    try:
        print(json.dumps(response.json(), indent=2, ensure_ascii=False))
    except ValueError:
        print(response.text)
    return 0 if response.is_success else 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `admin` on the top-level subcommands."""
    p = sub.add_parser("admin", help="admin API: orgs, squads, keys, settings, BYOK, endpoints, catalog")
    p.add_argument(
        "--url", type=ingress_url, default=os.environ.get("TURNOUT_URL", DEFAULT_URL), help="ingress base URL"
    )
    p.add_argument(
        "--key", type=api_key, help="admin or operator key (default: $TURNOUT_ADMIN_KEY, else $TURNOUT_OPERATOR_KEY)"
    )
    res = p.add_subparsers(dest="resource", required=True)
    g = res.add_parser("gen-secret-key", help="print a new TURNOUT_SECRET_KEY value (no server needed)")
    g.set_defaults(func=cmd_gen_secret_key)
    r = res.add_parser("rotate-secrets", help="re-encrypt every stored secret under the first TURNOUT_SECRET_KEY")
    r.set_defaults(func=cmd_admin, action="rotate")

    def actions(name: str, spec: dict[str, list[str]]) -> dict[str, argparse.ArgumentParser]:
        parser = res.add_parser(name, help="orgs (operator key)" if name == "orgs" else f"{name} of an org")
        acts = parser.add_subparsers(dest="action", required=True)
        out = {}
        for action, positionals in spec.items():
            a = acts.add_parser(action, allow_abbrev=False)  # `--api-key` must not pass for `--api-key-env`
            for positional in positionals:
                a.add_argument(positional)
            a.set_defaults(func=cmd_admin)
            out[action] = a
        return out

    orgs = actions("orgs", {"list": [], "get": ["org"], "create": ["org"], "delete": ["org"]})
    orgs["create"].add_argument("--settings", help="org settings as JSON")
    squads = actions(
        "squads", {"list": ["org"], "get": ["org", "name"], "create": ["org", "name"], "delete": ["org", "name"]}
    )
    squads["create"].add_argument("--settings", help="squad settings as JSON")
    keys = actions(
        "keys",
        {
            a: ["org"] if a == "list" else ["org", "name"]
            for a in ("list", "get", "effective", "create", "update", "revoke", "delete")
        },
    )
    keys["create"].add_argument("--squad")
    keys["create"].add_argument("--admin", action="store_true")
    keys["create"].add_argument("--ttl-s", type=float, help="expire this many seconds from now")
    keys["create"].add_argument("--expires-at", help="ISO-8601 or epoch seconds")
    keys["create"].add_argument("--settings", help="key settings as JSON")
    keys["update"].add_argument("--squad")
    keys["update"].add_argument("--no-squad", action="store_true")
    keys["update"].add_argument("--admin", dest="admin", action="store_true", default=None)
    keys["update"].add_argument("--no-admin", dest="admin", action="store_false")
    keys["update"].add_argument("--expires-at")
    keys["update"].add_argument("--no-expiry", action="store_true")
    spend = actions("spend", {"show": ["org"]})
    spend["show"].add_argument("--period", choices=["day", "month"], default="month", help="UTC day or month")
    spend["show"].add_argument("--at", help="a moment in the period (ISO-8601 or epoch seconds; default now)")
    settings = actions("settings", {"get": ["org"], "set": ["org", "json"], "replace": ["org", "json"]})
    for s in settings.values():
        s.add_argument("--squad")
        s.add_argument("--key", dest="key_name")
    provider = actions("provider-keys", {"list": ["org"], "set": ["org", "provider"], "delete": ["org", "provider"]})
    provider["set"].add_argument("--api-key-env", help="read the key from this environment variable (else stdin)")
    endpoints = actions(
        "endpoints", {"list": ["org"], "get": ["org", "name"], "set": ["org", "name"], "delete": ["org", "name"]}
    )
    endpoints["set"].add_argument("--base-url", required=True)
    endpoints["set"].add_argument("--with-key", action="store_true", help="read the endpoint's key from stdin")
    endpoints["set"].add_argument("--api-key-env", help="read the endpoint's key from this environment variable")
    admin_catalog.add_parser(res, cmd_admin)
