"""Clock skew: how far this process's wall clock is from Redis's.

Owns: the skew estimate from one `TIME` round trip and the rule that says
when it is worth a warning (issue #14 item 3: a process more than 1 s off
Redis is reported). Deadlines do not depend on it (they are measured on
Redis's clock); the check only makes a skewed host visible.
Must not import: anything outside the standard library.
"""

from __future__ import annotations

SKEW_WARN_S = 1.0
"""A skew larger than this (seconds, either sign) is logged as a warning."""


def skew_s(sent_s: float, server_s: float, received_s: float) -> float:
    """This clock minus the server's, in seconds, from one request/response.

    The server read its clock somewhere between sending and receiving; the
    midpoint of the local send and receive times is the best guess of the
    local time at that instant (the error is at most half the round trip).

    Args:
        sent_s: local wall clock (epoch s) just before the request.
        server_s: the server's clock in the reply (epoch s).
        received_s: local wall clock (epoch s) just after the reply.

    Returns:
        Positive when this clock is ahead of the server's.
    """
    return (sent_s + received_s) / 2 - server_s


def skew_alarming(skew: float, threshold_s: float = SKEW_WARN_S) -> bool:
    """True when `skew` (seconds, either sign) is strictly beyond `threshold_s`."""
    return abs(skew) > threshold_s
