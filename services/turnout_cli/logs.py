"""`turnout logs export` and `turnout audit export`: download attempt records or the audit log.

    turnout logs export --url URL --key KEY [--org ORG] --format jsonl|csv [--since T] [--until T] [-o FILE]
    turnout audit export --url URL --key OPERATOR_KEY [--since T] [--until T] [--output FILE]

`logs export` calls `GET /admin/v1/logs/export` of a running ingress (one
org's attempt records, SPEC §9) with an org's admin key (its own org;
`--org` may be left out) or the operator key (`--org` required); key
default `$TURNOUT_ADMIN_KEY`, else `$TURNOUT_OPERATOR_KEY`, as `turnout
admin`. `audit export` calls `GET /admin/v1/audit/export` with the operator
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
) -> argparse.ArgumentParser:
    e = sub.add_parser("export", help=help_text)
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
    p = sub.add_parser("logs", help="attempt records")
    e = _export_parser(
        p.add_subparsers(dest="logs_command", required=True),
        "export one org's attempt records (an org's admin key, or the operator key with --org)",
        "TURNOUT_ADMIN_KEY",
        "TURNOUT_OPERATOR_KEY",
    )
    e.add_argument("--org", help="the org whose records to export (required with the operator key)")
    e.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    e.set_defaults(func=cmd_logs_export)
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
        "logs",
        "/admin/v1/logs/export",
        params,
        "an admin or operator key",
        "TURNOUT_ADMIN_KEY or $TURNOUT_OPERATOR_KEY",
    )


def cmd_audit_export(args: argparse.Namespace) -> int:
    """Stream the audit export to `--output` or stdout. Returns 0, or 1 on an error answer."""
    return _export(args, "audit", "/admin/v1/audit/export", {}, "the operator key", "TURNOUT_OPERATOR_KEY")


def _export(args: argparse.Namespace, what: str, path: str, params: dict[str, str], needs: str, env: str) -> int:
    import httpx

    if not args.key:
        print(f"turnout {what} export: {needs} is needed (--key or ${env})", file=sys.stderr)
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
                print(f"turnout {what} export: {response.status_code}: {_message(response)}", file=sys.stderr)
                return 1
            out = open(args.output, "wb") if args.output else sys.stdout.buffer  # noqa: SIM115 - closed below
            for chunk in response.iter_bytes():
                out.write(chunk)
            out.flush()
    except httpx.HTTPError as exc:
        print(f"turnout {what} export: {url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the output file: a missing directory, no permission, a full disk
        print(f"turnout {what} export: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
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
