"""`turnout logs export`: download an org's attempt records (SPEC §9).

    turnout logs export --url URL --key KEY --format jsonl|csv [--since T] [--until T] [--output FILE]

Calls `GET /admin/v1/logs/export` of a running ingress with an admin key and
streams the answer to stdout (or `--output`). `--since` / `--until` are
ISO-8601 or epoch seconds. The key defaults to `$TURNOUT_ADMIN_KEY`; it is
sent only as the bearer token and never printed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import httpx


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register `logs export` on the top-level subcommands."""
    p = sub.add_parser("logs", help="attempt records")
    lsub = p.add_subparsers(dest="logs_command", required=True)
    e = lsub.add_parser("export", help="export your org's attempt records (admin key)")
    e.add_argument("--url", default=os.environ.get("TURNOUT_URL", "http://127.0.0.1:8080"),
                   help="ingress base URL (default: $TURNOUT_URL or http://127.0.0.1:8080)")
    e.add_argument("--key", default=os.environ.get("TURNOUT_ADMIN_KEY"), help="admin key (default: $TURNOUT_ADMIN_KEY)")
    e.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    e.add_argument("--since", help="ISO-8601 or epoch seconds (inclusive)")
    e.add_argument("--until", help="ISO-8601 or epoch seconds (inclusive)")
    e.add_argument("--output", "-o", help="file to write (default: stdout)")
    e.add_argument("--timeout", type=float, default=60.0, help="seconds without data before giving up")
    e.set_defaults(func=cmd_logs_export)


def cmd_logs_export(args: argparse.Namespace) -> int:
    """Stream the export to `--output` or stdout. Returns 0, or 1 on an error answer."""
    import httpx

    if not args.key:
        print("turnout logs export: an admin key is needed (--key or $TURNOUT_ADMIN_KEY)", file=sys.stderr)
        return 2
    params = {"format": args.format}
    for name in ("since", "until"):
        if getattr(args, name):
            params[name] = getattr(args, name)
    url = args.url.rstrip("/") + "/admin/v1/logs/export"
    headers = {"authorization": f"Bearer {args.key}"}
    out: IO[bytes] = open(args.output, "wb") if args.output else sys.stdout.buffer  # noqa: SIM115 - closed below
    try:
        with httpx.stream("GET", url, params=params, headers=headers, timeout=args.timeout) as response:
            if response.status_code != 200:
                response.read()
                print(f"turnout logs export: {response.status_code}: {_message(response)}", file=sys.stderr)
                return 1
            for chunk in response.iter_bytes():
                out.write(chunk)
        out.flush()
    except httpx.HTTPError as exc:
        print(f"turnout logs export: {url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.output:
            out.close()
    return 0


def _message(response: "httpx.Response") -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]
