"""Reading a `text/event-stream` body incrementally, as the WHATWG HTML standard interprets it.

Owns: `EventReader`, fed the body's text as it arrives (any split, a CR LF pair cut between two
reads included) and answering the events each feed completed. The rules, from
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation:
a line ends at CR LF, LF or CR; a line starting with `:` is a comment; otherwise the field name
is what precedes the first `:` (the whole line without one) and the value what follows, one
leading space removed; `event` sets the type, `data` adds a line, `id` sets the last event id
(not when it holds NUL), `retry` a reconnection time when it is all ASCII digits; anything else
is ignored. A blank line dispatches the event being built — when any field was given, so an
`event:` line alone still yields an event (what the providers' streams and the gateway's own
readers rely on) — with its data lines joined by LF, then clears the type, the data and the
retry (the last event id stays). At the end of the body an event not closed by a blank line is
dropped.
Must not import: the family modules, services, FastAPI, arq. Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from typing import Final

from httpx_sse import ServerSentEvent

_EOL: Final = re.compile(r"\r\n|\r|\n")


class EventReader:
    """One event stream's parser (see the module doc); feed it text, get the completed events."""

    def __init__(self) -> None:
        self._partial = ""  # the text of a line not ended yet (never holds a CR or LF)
        self._after_cr = False  # the last text ended with CR: an LF first in the next one belongs to it
        self._event = ""
        self._data: list[str] = []
        self._id = ""
        self._retry: int | None = None
        self._touched = False  # a field of the event being built was given

    def feed(self, text: str) -> list[ServerSentEvent]:
        """The events that `text`, the next part of the body, completes (in order; often none)."""
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = text.endswith("\r")
        *lines, self._partial = _EOL.split(self._partial + text)
        return [event for line in lines if (event := self._line(line)) is not None]

    def close(self) -> None:
        """The end of the body: it completes no event (an event not closed by a blank line is
        dropped, its last line unended or not)."""
        self._partial = ""
        self._event, self._data, self._retry, self._touched = "", [], None, False

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" in value:
                return None
            self._id = value
        elif name == "retry":
            if not (value.isascii() and value.isdigit()):
                return None
            self._retry = int(value)
        else:
            return None
        self._touched = True
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._touched:
            return None
        event = ServerSentEvent(event=self._event, data="\n".join(self._data), id=self._id, retry=self._retry)
        self._event, self._data, self._retry, self._touched = "", [], None, False
        return event
