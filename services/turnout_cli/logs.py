"""`turnout logs export`, `turnout logs refusals` and `turnout audit export`: download attempt records,
door refusals or the audit log.

    turnout logs export --url URL --key KEY [--org ORG] --format jsonl|csv [--since T] [--until T] [-o FILE]
    turnout logs refusals --url URL --key KEY [--org ORG|-] [--route R] [--status N] [--code C] [--limit N]
                          [--since T] [--until T] [-o FILE]
    turnout audit export --url URL --key OPERATOR_KEY [--since T] [--until T] [--output FILE]

`logs export` calls `GET /admin/v1/logs/export` of a running ingress (one
org's attempt records, SPEC §9) with an org's admin key (its own org;
`--org` may be left out) or the operator key (`--org` required); key
default `$TURNOUT_ADMIN_KEY`, else `$TURNOUT_OPERATOR_KEY`, as `turnout
admin`. `logs refusals` calls `GET /admin/v1/refusals` with the same keys (the
door refusals' rows of one org, newest first, as the route's JSON; `--org -`:
the callers not identified, operator key only). `audit export` calls `GET /admin/v1/audit/export` with the operator
key (every admin write as JSON lines; key default `$TURNOUT_OPERATOR_KEY`).
Both stream the answer to stdout (or `--output`).
`--since` / `--until` are ISO-8601 or epoch seconds. The key is sent only
as the bearer token and never printed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO, TYPE_CHECKING

from turnout_cli.arg_types import api_key, ingress_url, seconds

if TYPE_CHECKING:
    import httpx


def _export_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    help_text: str,
    *key_envs: str,
    name: str = "export",
) -> argparse.ArgumentParser:
    e = sub.add_parser(name, help=help_text)
    e.add_argument(
        "--url",
        type=ingress_url,
        default=os.environ.get("TURNOUT_URL", "http://127.0.0.1:8080"),
        help="ingress base URL (default: $TURNOUT_URL or http://127.0.0.1:8080)",
    )
    default = next((os.environ[name] for name in key_envs if os.environ.get(name)), None)
    shown = ", else ".join(f"${name}" for name in key_envs)
    e.add_argument("--key", type=api_key, default=default, help=f"the key (default: {shown})")
    e.add_argument("--since", help="ISO-8601 or epoch seconds (inclusive)")
    e.add_argument("--until", help="ISO-8601 or epoch seconds (inclusive)")
    e.add_argument("--output", "-o", help="file to write (default: stdout)")
    e.add_argument("--timeout", type=seconds, default=60.0, help="seconds without data before giving up")
    return e


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `logs export` and `audit export` on the top-level subcommands."""
    p = sub.add_parser("logs", help="attempt records and door refusals")
    logs = p.add_subparsers(dest="logs_command", required=True)
    e = _export_parser(
        logs,
        "export one org's attempt records (an org's admin key, or the operator key with --org)",
        "TURNOUT_ADMIN_KEY",
        "TURNOUT_OPERATOR_KEY",
    )
    e.add_argument("--org", help="the org whose records to export (required with the operator key)")
    e.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    e.set_defaults(func=cmd_logs_export)
    r = _export_parser(
        logs,
        "one org's door refusals, newest first, as JSON (an org's admin key, or the operator key with --org)",
        "TURNOUT_ADMIN_KEY",
        "TURNOUT_OPERATOR_KEY",
        name="refusals",
    )
    r.add_argument("--org", help="the org (required with the operator key; `-`: the callers not identified)")
    for flag, what in REFUSAL_FILTERS.items():
        r.add_argument(f"--{flag}", help=what)
    r.set_defaults(func=cmd_logs_refusals)
    p = sub.add_parser("audit", help="the audit log of admin writes")
    e = _export_parser(
        p.add_subparsers(dest="audit_command", required=True),
        "export the audit log as JSON lines (operator key)",
        "TURNOUT_OPERATOR_KEY",
    )
    e.set_defaults(func=cmd_audit_export)


def cmd_logs_export(args: argparse.Namespace) -> int:
    """Stream the records export (`--org`'s, else the admin key's org) to `--output` or stdout.
    Returns 0, 1 on an error answer (the gateway's message printed), 2 without a key."""
    params = {"format": args.format, **({"org": args.org} if args.org else {})}
    return _export(
        args,
        "logs export",
        "/admin/v1/logs/export",
        params,
        "an admin or operator key",
        "TURNOUT_ADMIN_KEY or $TURNOUT_OPERATOR_KEY",
    )


REFUSAL_FILTERS = {
    "route": "a route label (`/v1/chat/completions`, `/v1/images`, `admin`, `other`)",
    "status": "an HTTP status (400-599)",
    "code": "an error code (`rate_limit_exceeded`)",
    "limit": "most rows (1-1000, default 100)",
}
"""`logs refusals`'s filters, passed as the route's query parameters of the same names (checked there: a bad
one is the gateway's 400, printed)."""


def cmd_logs_refusals(args: argparse.Namespace) -> int:
    """Write the door refusals' rows (`GET /admin/v1/refusals`) to `--output` or stdout.
    Returns 0, 1 on an error answer (the gateway's message printed), 2 without a key."""
    params = {name: str(value) for name in ("org", *REFUSAL_FILTERS) if (value := getattr(args, name))}
    return _export(
        args,
        "logs refusals",
        "/admin/v1/refusals",
        params,
        "an admin or operator key",
        "TURNOUT_ADMIN_KEY or $TURNOUT_OPERATOR_KEY",
    )


def cmd_audit_export(args: argparse.Namespace) -> int:
    """Stream the audit export to `--output` or stdout. Returns 0, or 1 on an error answer."""
    return _export(args, "audit export", "/admin/v1/audit/export", {}, "the operator key", "TURNOUT_OPERATOR_KEY")


def _export(args: argparse.Namespace, what: str, path: str, params: dict[str, str], needs: str, env: str) -> int:
    import httpx

    if not args.key:
        print(f"turnout {what}: {needs} is needed (--key or ${env})", file=sys.stderr)
        return 2
    for name in ("since", "until"):
        if getattr(args, name):
            params[name] = getattr(args, name)
    url = args.url.rstrip("/") + path
    headers = {"authorization": f"Bearer {args.key}"}
    out: IO[bytes] | None = None
    try:
        with httpx.stream("GET", url, params=params, headers=headers, timeout=args.timeout) as response:
            if response.status_code != 200:
                response.read()
                print(f"turnout {what}: {response.status_code}: {_message(response)}", file=sys.stderr)
                return 1
            out = open(args.output, "wb") if args.output else sys.stdout.buffer  # noqa: SIM115 - closed below
            last = b"\n"
            for chunk in response.iter_bytes():
                out.write(chunk)
                last = chunk[-1:] or last
            if last != b"\n" and not args.output:  # a JSON answer (the refusals) ends its line on a terminal too
                out.write(b"\n")
            out.flush()
    except httpx.HTTPError as exc:
        print(f"turnout {what}: {url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the output file: a missing directory, no permission, a full disk
        print(f"turnout {what}: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        if args.output and out is not None:
            out.close()
    return 0


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]
