"""Streaming after the commit point: relaying a committed stream and rescuing a broken one (SPEC §8).

Owns, one job per module:
- `relay`: `relay.relay` forwards a committed upstream stream to the client,
  held frames first, never retried once committed;
- `continuation`: continuing a broken stream from the text already
  delivered (policy `stream_recovery: continue`), and the usage the client
  is told afterwards.

The names below are re-exported; each module is imported on first use
(PEP 562), like the other packages of the library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnout import lazy_face

if TYPE_CHECKING:
    from turnout.streaming.continuation import Continuation as Continuation
    from turnout.streaming.continuation import whole_answer_usage as whole_answer_usage

#: Public name -> the module of this package that defines it.
FACE = {
    "Continuation": "continuation",
    "whole_answer_usage": "continuation",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_face(__name__, FACE)
