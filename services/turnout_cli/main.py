"""`turnout` command line (SPEC §12).

    turnout dev                  the whole fleet on one machine (Redis, simulator,
                                 ingress, worker(s)) with a demo catalog
    turnout ingress              one ingress process (uvicorn)
    turnout worker               one worker process (arq)
    turnout sim                  the provider simulator
    turnout config check FILE    validate a configuration file
    turnout healthcheck          the container image's HEALTHCHECK (`turnout_cli.healthcheck`)
    turnout logs export          download one org's attempt records (admin key, or operator key and --org)
    turnout logs refusals        one org's door refusals, newest first (admin key, or operator key and --org)
    turnout admin ...            tenancy admin: orgs, squads, keys, settings, BYOK,
                                 custom endpoints, gen-secret-key, rotate-secrets

Environment: TURNOUT_CONFIG, TURNOUT_REDIS_URL, TURNOUT_HOST, TURNOUT_PORT, TURNOUT_ALLOW_NO_AOF,
TURNOUT_PYTHON_OPTIMIZE (`turnout ingress`/`worker` restart themselves under `-OO`; `turnout_cli.optimize`)
(read once, `turnout.settings.Settings`; a malformed one is named and exits 2).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnout.errors import ConfigError
from turnout.settings import DEFAULT_REDIS_URL, Settings
from turnout.state.redis_url import ACCEPTED, redacted, redis_url_fault
from turnout_cli.admin import add_parser as add_admin_parser
from turnout_cli.lean import leave_out_unused_imports
from turnout_cli.logs import add_parser as add_logs_parser
from turnout_cli.optimize import reexec_optimized
from turnout_cli.pipes import closed_pipe_safe

if TYPE_CHECKING:
    from turnout.runtime import Role


def _settings(args: argparse.Namespace) -> Settings:
    settings = getattr(args, "process_settings", None)
    return settings if isinstance(settings, Settings) else Settings.from_env(os.environ)


def _config_path(args: argparse.Namespace) -> str:
    return str(getattr(args, "config", None) or _settings(args).config_path)


def _redis_url(args: argparse.Namespace) -> str:
    return str(getattr(args, "redis_url", None) or _settings(args).redis_url)


def cmd_ingress(args: argparse.Namespace) -> int:
    """Run one ingress process."""
    leave_out_unused_imports()
    import msgspec
    import uvicorn

    from turnout.config import load_config
    from turnout.observability.jsonlog import configure_logging
    from turnout_ingress.app import create_app
    from turnout_ingress.guard import fd_budget
    from turnout_ingress.guard.http import GuardLimits, guarded_protocol
    from turnout_ingress.observability import SERVICE_NAME

    configure_logging(SERVICE_NAME)
    settings = _settings(args)
    config = load_config(_config_path(args), env=settings.env)  # a bad file is refused before Redis is asked
    if (refused := _persistence_refused(args, "ingress")) is not None:
        return refused
    limits = GuardLimits.of(config.raw.gateway)
    fitted = fd_budget.apply(limits.max_connections)  # logged when lowered or refused
    if fitted is None:
        return EXIT_STARTUP_FAILURE
    limits = msgspec.structs.replace(limits, max_connections=fitted)
    app = create_app(config, redis_url=_redis_url(args), settings=settings, persistence_check=args.persistence_check)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            access_log=False,
            log_config=None,
            loop="uvloop",
            ws="none",  # no WebSocket route: the `websockets` package (~3 MiB) is never imported
            http=guarded_protocol(limits),
            timeout_graceful_shutdown=25,
        )
    )
    state = app.state.turnout
    state.stop_serving = lambda: setattr(server, "should_exit", True)  # a later persistence refusal stops it
    state.freeze_heap = True  # this process serves until it stops: `freeze_startup_heap` after start-up
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    except SystemExit:  # uvicorn's own exit (3) when the app's start-up failed
        if not state.keys_refused:
            raise
    if state.persistence_refused:
        return EXIT_NO_PERSISTENCE
    if state.keys_refused:
        return EXIT_SEALED_KEYS
    if state.config_refused:  # logged in one line
        return 2
    return 0 if server.started else EXIT_STARTUP_FAILURE


def cmd_worker(args: argparse.Namespace) -> int:
    """Run one worker process."""
    leave_out_unused_imports()
    from turnout.catalog.key_check import SealedKeysRefused
    from turnout.config import load_config
    from turnout.observability.jsonlog import configure_logging
    from turnout.state.persistence import PersistenceRefused
    from turnout_worker.app import run
    from turnout_worker.observe import SERVICE_NAME

    configure_logging(SERVICE_NAME)
    settings = _settings(args)
    config = load_config(_config_path(args), env=settings.env)  # a bad file is refused before Redis is asked
    if (refused := _persistence_refused(args, "worker")) is not None:
        return refused
    try:
        run(config, _redis_url(args), settings, persistence_check=args.persistence_check)
    except PersistenceRefused:  # Redis answered only after the start, without AOF (logged)
        return EXIT_NO_PERSISTENCE
    except SealedKeysRefused:  # logged
        return EXIT_SEALED_KEYS
    return 0


def cmd_healthcheck(args: argparse.Namespace) -> int:
    """Check the server this container runs (`turnout_cli.healthcheck`; urllib imported only here)."""
    from turnout_cli.healthcheck import cmd_healthcheck as check_container

    return check_container()


EXIT_NO_PERSISTENCE = 3
"""Exit code of `turnout ingress` / `turnout worker` refusing a Redis without AOF (at start, or once it answers)."""

EXIT_SEALED_KEYS = 4
"""Exit code of `turnout ingress` / `turnout worker` that opens none of the catalog's sealed provider keys
(`turnout.catalog.key_check`: no `TURNOUT_SECRET_KEY`, or not the fleet's)."""

EXIT_STARTUP_FAILURE = 3
"""Exit code of `turnout ingress` when its server did not start (uvicorn's own code for it)."""


def _persistence_refused(args: argparse.Namespace, role: Role) -> int | None:
    """The start-up AOF check (`turnout.runtime.require_persistence`): None to start, else the exit code.

    A Redis that did not answer leaves `args.persistence_check` set: the check
    to await once it does (`turnout.runtime.require_persistence_later`, which
    raises `PersistenceRefused` when Redis then runs without AOF, not allowed).
    """
    from turnout.runtime import require_persistence, require_persistence_later
    from turnout.state.persistence import PersistenceRefused

    redis_url, settings, allow = _redis_url(args), _settings(args), bool(getattr(args, "allow_no_aof", False))
    try:
        decision = require_persistence(redis_url, settings, role=role, allow=allow)
    except PersistenceRefused as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_NO_PERSISTENCE
    args.persistence_check = (
        None if decision.checked else lambda: require_persistence_later(redis_url, settings, role=role, allow=allow)
    )
    return None


def cmd_sim(args: argparse.Namespace) -> int:
    """Run the provider simulator; with `--write-key-file PATH`, write a service-account key file
    whose `token_uri` is this simulator's `/token` (for a `vertex` provider) and exit."""
    if args.write_key_file:
        from pathlib import Path

        from turnout_sim.key_file import write_key_file

        shown = f"[{args.host}]" if ":" in args.host else args.host
        written = write_key_file(Path(args.write_key_file), f"http://{shown}:{args.port}/token")
        print(f"wrote {written} (token_uri http://{shown}:{args.port}/token)")
        return 0
    from turnout_sim.app import run

    run(args.host, args.port)
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    """Validate a configuration file; print what it declares, or every error it has at once.
    A `vertex` provider's service-account file is read too (`unusable_key_files`), also when
    the file has other errors."""
    from turnout.config import load_config
    from turnout.rules.google_fields import unusable_key_files

    try:
        config = load_config(args.file)
    except ConfigError as exc:
        errors = exc.errors + [e for e in unusable_key_files(_file_providers(args.file)) if e not in exc.errors]
        return _invalid(args.file, errors)
    errors = unusable_key_files(config.raw.providers)
    if errors:
        return _invalid(args.file, errors)
    raw = config.raw
    keys = sum(len(o.keys) for o in raw.orgs.values())
    print(
        f"ok: {args.file}: {len(raw.providers)} provider(s), {len(raw.models)} model(s), "
        f"{len(raw.orgs)} org(s), {keys} gateway key(s)"
    )
    return 0


def _file_providers(path: str) -> dict[Any, Any]:
    """The `providers:` mapping of the file at `path` as written, `${...}` replaced from the
    environment where set; {} when the file or its YAML cannot be read (already reported)."""
    from turnout.config.environment import interpolate
    from turnout.config.reading import read_document

    try:
        data, _ = interpolate(read_document(Path(path).read_text(encoding="utf-8"), path), os.environ)
    except (OSError, ConfigError):
        return {}
    providers = data.get("providers") if isinstance(data, dict) else None
    return providers if isinstance(providers, dict) else {}


def _invalid(path: str, errors: list[str]) -> int:
    """Print a file's errors to stderr, each naming the file (one line; or a count and a line
    each); the exit status 1."""
    if len(errors) > 1:
        print(f"invalid: {path}: {len(errors)} error(s)", file=sys.stderr)
        print("\n".join(f"  {line}" for line in errors), file=sys.stderr)
    elif errors[0].startswith(f"{path}:"):
        print(f"invalid: {errors[0]}", file=sys.stderr)
    else:
        print(f"invalid: {path}: {errors[0]}", file=sys.stderr)
    return 1


def cmd_dev(args: argparse.Namespace) -> int:
    """Run the whole fleet locally (see `turnout_cli.dev`)."""
    from turnout_cli.dev import run_dev

    return run_dev(args)


def _whole_number(text: str, low: int, high: int, what: str) -> int:
    """`text` as a whole number from `low` to `high`.

    Raises:
        argparse.ArgumentTypeError: `<what> is a whole number from <low> to <high>, got '<text>'`.
    """
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{what} is a whole number from {low} to {high}, got {text[:40]!r}")
    return value


def port_number(text: str) -> int:
    """A TCP port from the command line or `$TURNOUT_PORT`: a whole number from 1 to 65535.

    Raises:
        argparse.ArgumentTypeError: anything else, quoting the value (argparse names the option).
    """
    return _whole_number(text, 1, 65535, "a port")


def worker_count(text: str) -> int:
    """`turnout dev --workers`: a whole number from 1 to 64.

    Raises:
        argparse.ArgumentTypeError: anything else, quoting the value (argparse names the option).
    """
    return _whole_number(text, 1, 64, "a number of workers")


def listen_host(text: str) -> str:
    """`--host` (default `$TURNOUT_HOST`): an address or a name that resolves, so a typo is named at once
    instead of failing the server's start with a resolver error (exit 3).

    Raises:
        argparse.ArgumentTypeError: the resolver's reason, quoting the value.
    """
    import socket

    try:
        socket.getaddrinfo(text, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is no address to listen on ({reason}); give an IP address such as 127.0.0.1 or 0.0.0.0, "
            "or a name that resolves (--host or $TURNOUT_HOST)"
        ) from None
    return text


def redis_url_arg(text: str) -> str:
    """`--redis-url`: a Redis URL of a form the clients read (`turnout.state.redis_url.redis_url_fault`).

    Raises:
        argparse.ArgumentTypeError: why not, the URL's user and password masked (argparse names the option).
    """
    fault = redis_url_fault(text)
    if fault is not None:
        raise argparse.ArgumentTypeError(f"not a Redis URL ({ACCEPTED}): {fault}; got {redacted(text)!r}")
    return text


def installed_version() -> str:
    """The installed distribution's version (`pip install` of the wheel or `-e .`: its
    `pyproject.toml` version), or `unknown` when run from a tree that was never installed."""
    try:
        return importlib.metadata.version("turnout")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_parser(settings: Settings | None = None) -> argparse.ArgumentParser:
    """The argument parser of every subcommand (defaults from `settings`, else the process environment;
    a malformed variable there exits 2 naming it, as argparse does for a flag)."""
    parser = argparse.ArgumentParser(prog="turnout", description="Turnout LLM gateway")
    parser.add_argument("--version", action="version", version=f"turnout {installed_version()}")
    if settings is None:
        try:
            settings = Settings.from_env(os.environ)
        except ConfigError as exc:
            parser.error(str(exc))
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="configuration file (default: $TURNOUT_CONFIG or turnout.yaml)")
        p.add_argument(
            "--redis-url", type=redis_url_arg, help=f"Redis URL (default: $TURNOUT_REDIS_URL or {DEFAULT_REDIS_URL})"
        )
        p.add_argument(
            "--allow-no-aof",
            action="store_true",
            help="start even when Redis runs without AOF persistence (same as $TURNOUT_ALLOW_NO_AOF=1): "
            "queued jobs and breaker state are then lost when Redis restarts",
        )

    host, port = settings.host, settings.port

    p = sub.add_parser("dev", help="run Redis, simulator, ingress and worker(s) together")
    p.add_argument("--config", help="configuration file (default: $TURNOUT_CONFIG, else the demo catalog)")
    p.add_argument(
        "--redis-url",
        type=redis_url_arg,
        help="Redis URL (default: $TURNOUT_REDIS_URL, else a redis-server started on a free port, printed at start)",
    )
    p.add_argument("--host", type=listen_host, default=host)
    p.add_argument("--port", type=port_number, default=port, help="default: $TURNOUT_PORT, else 8080")
    p.add_argument("--workers", type=worker_count, default=1, help="worker processes (default 1, at most 64)")
    p.add_argument(
        "--sim-port",
        type=port_number,
        default=None,
        help="the provider simulator's port (default 9100); with --config, giving it starts the "
        "simulator too, for a file whose providers point at it",
    )
    p.set_defaults(func=cmd_dev)

    p = sub.add_parser("ingress", help="run one ingress process")
    common(p)
    p.add_argument("--host", type=listen_host, default=host)
    p.add_argument("--port", type=port_number, default=port, help="default: $TURNOUT_PORT, else 8080")
    p.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug", "trace"))
    p.set_defaults(func=cmd_ingress)

    p = sub.add_parser("worker", help="run one worker process")
    common(p)
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("sim", help="run the provider simulator")
    p.add_argument("--host", type=listen_host, default="127.0.0.1")
    p.add_argument("--port", type=port_number, default=9100)
    p.add_argument(
        "--write-key-file", metavar="PATH", help="write a service-account key file for this simulator's Vertex AI, exit"
    )
    p.set_defaults(func=cmd_sim)

    p = sub.add_parser("config", help="configuration tools")
    csub = p.add_subparsers(dest="config_command", required=True)
    c = csub.add_parser("check", help="validate a configuration file")
    c.add_argument("file")
    c.set_defaults(func=cmd_config_check)
    p = sub.add_parser("healthcheck", help="check the server this container runs (the image's HEALTHCHECK)")
    p.set_defaults(func=cmd_healthcheck)
    add_logs_parser(sub)
    add_admin_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `turnout` command."""
    try:
        settings = Settings.from_env(os.environ)
    except ConfigError as exc:
        print(f"turnout: configuration error: {exc}", file=sys.stderr)
        return 2
    args = build_parser(settings).parse_args(argv)
    args.process_settings = settings
    if argv is None and args.func in (cmd_ingress, cmd_worker):
        reexec_optimized(settings.python_optimize)  # a server process: under -OO unless told otherwise
    try:
        return closed_pipe_safe(lambda: int(args.func(args)))
    except ConfigError as exc:
        print(f"turnout: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
