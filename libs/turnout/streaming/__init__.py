"""Streaming after the commit point: relaying a committed stream and rescuing a broken one (SPEC §8).

Owns, one job per module:
- `relay`: `relay.relay` forwards a committed upstream stream to the client,
  held frames first, never retried once committed;
- `continuation`: continuing a broken stream from the text already
  delivered (policy `stream_recovery: continue`), and the usage the client
  is told afterwards.

Names are imported from their modules (`from turnout.streaming.continuation
import Continuation`), like the other packages of the library.
"""
