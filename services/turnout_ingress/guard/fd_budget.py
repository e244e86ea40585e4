"""The start-time check of `gateway.max_connections` against the process's file descriptor limit (#40 item 8).

Owns: what an ingress does when `max_connections` plus its own needs
(`RESERVED_FDS`: Redis pools, the upstream and custom-endpoint clients,
the listener, logs) exceed `RLIMIT_NOFILE`: it first raises its soft limit
toward the hard one; if that is still short it lowers `max_connections` to
what fits and says so in a warning; and if fewer than `MIN_CONNECTIONS` fit
it refuses to start (`fit` returns None). Otherwise slow connections past the
descriptor limit would starve every other client (accept fails with EMFILE
while the cap is never reached).
Must not import: the app.
"""

from __future__ import annotations

import logging
import resource

import msgspec

log = logging.getLogger("turnout.ingress")

RESERVED_FDS = 512
"""Descriptors an ingress keeps for itself besides client connections: its Redis pools (ingress and
listener), its upstream HTTP pools, the listening socket, log and library files, with headroom."""
MIN_CONNECTIONS = 64
"""Fewer client connections than this is no gateway: the ingress refuses to start instead."""


class Fit(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of `fit`.

    Attributes:
        soft: the soft `RLIMIT_NOFILE` to set (the current one when no raise is needed or possible).
        max_connections: the connection cap to serve with (the configured one when it fits).
        note: what was changed and why (a warning), or None.
    """

    soft: int
    max_connections: int
    note: str | None = None


def fit(max_connections: int, soft: int, hard: int, reserve: int = RESERVED_FDS) -> Fit | None:
    """Fit `max_connections` client connections and `reserve` descriptors under the limits (pure).

    Args:
        max_connections: `gateway.max_connections`.
        soft / hard: `RLIMIT_NOFILE` (`resource.RLIM_INFINITY` as a very large number).
        reserve: descriptors the process needs besides client connections.

    Returns:
        The soft limit to set and the cap to serve with, or None when fewer than
        `MIN_CONNECTIONS` fit even at the hard limit (refuse to start).
    """
    need = max_connections + reserve
    if need <= soft:
        return Fit(soft=soft, max_connections=max_connections)
    raised = need if hard == resource.RLIM_INFINITY or need <= hard else hard
    if need <= raised:
        return Fit(soft=raised, max_connections=max_connections)
    room = raised - reserve
    if room < MIN_CONNECTIONS:
        return None
    note = (
        f"gateway.max_connections {max_connections} plus the ingress's own {reserve} descriptors exceed "
        f"the file descriptor limit ({raised}, `ulimit -n`); serving with max_connections {room}. "
        f"Raise the limit (`ulimit -n {need}` or the service's LimitNOFILE) to keep {max_connections}."
    )
    return Fit(soft=raised, max_connections=room, note=note)


def apply(max_connections: int) -> int | None:
    """Check `max_connections` against this process's `RLIMIT_NOFILE` (`fit`), raise the soft limit
    as needed and log any lowering; the cap to serve with, or None (logged: refuse to start)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    found = fit(max_connections, soft, hard)
    if found is None:
        log.error(
            "gateway.max_connections %d does not fit the file descriptor limit (soft %d, hard %d) with the "
            "ingress's own %d descriptors: fewer than %d connections would be left; raise `ulimit -n`",
            max_connections,
            soft,
            hard,
            RESERVED_FDS,
            MIN_CONNECTIONS,
        )
        return None
    if found.soft != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (found.soft, hard))
    if found.note is not None:
        log.warning("%s", found.note)
    return found.max_connections
