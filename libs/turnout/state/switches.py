"""On/off environment variables (`TURNOUT_ALLOW_NO_AOF`, `TURNOUT_CATALOG_FROM_FILE`): one reading for all.

Owns: `switch_on`. `1`, `true`, `yes` and `on` turn a switch on; `0`,
`false`, `no`, `off`, empty or unset leave it off (any case, spaces
trimmed). Anything else is refused naming the variable, so a typo such as
`ture` is not silently off. `turnout.settings.Settings.from_env` reads each
switch once at start, so a malformed one stops the process there (exit 2).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from collections.abc import Mapping

CATALOG_FROM_FILE = "TURNOUT_CATALOG_FROM_FILE"
"""On: the process's file replaces the catalog in Redis at start (`turnout.catalog.seed`)."""

ON = frozenset({"1", "true", "yes", "on"})
OFF = frozenset({"", "0", "false", "no", "off"})


def switch_on(env: Mapping[str, str], name: str) -> bool:
    """Whether the switch `name` is on in `env`.

    Raises:
        ValueError: `<name> must be 1, true, yes or on (or 0, false, no, off), got '<value>'`.
    """
    raw = env.get(name)
    value = (raw or "").strip().lower()
    if value in ON:
        return True
    if value in OFF:
        return False
    raise ValueError(f"{name} must be 1, true, yes or on (or 0, false, no, off), got {(raw or '')[:40]!r}")
