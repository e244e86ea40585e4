"""A client's value quoted in an error message, whatever it holds.

Owns: `quoted`, used where an admin or dashboard error names what was sent
(an org that does not exist, a `since` that is not a moment, a `last` that
is not a number of minutes): the value in backticks, cut to a few dozen
characters with its length given, or as a JSON string when it holds a
backtick or a character that is not printable, so a newline never splits
the message nor a backtick its quoting.
"""

from __future__ import annotations

import json


def quoted(text: str | None, limit: int) -> str:
    """`text` quoted for a message: `` `abc` ``, or `"a\\nb"` (a JSON string) when it holds a
    backtick or a character that is not printable; only its first `limit` characters,
    followed by `… (N characters)` when it is longer. None quotes as an empty string."""
    whole = text or ""
    cut = whole[:limit]
    shown = f"`{cut}`" if cut.isprintable() and "`" not in cut else json.dumps(cut, ensure_ascii=False)
    return shown if len(whole) <= limit else f"{shown}… ({len(whole)} characters)"
