"""The errors of one configuration document, collected, not stopped at the first (SPEC §11).

Owns: the one list the type errors (`turnout.config.type_errors`) and the
rules beyond the types (`turnout.config.checks`) add to, so a file with three
errors is refused with three `path: message` lines, and how that list reads
as one message (`report`).
Must not import: anything of Turnout's but `turnout.errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec

from turnout.errors import ConfigError

MAX_ERRORS = 50
"""At most this many errors are reported (the rest are counted)."""

P = ParamSpec("P")


def report(errors: list[str]) -> str:
    """The errors as one message, one per line (at most `MAX_ERRORS`)."""
    shown = errors[:MAX_ERRORS]
    more = len(errors) - len(shown)
    return "\n".join(shown + ([f"... and {more} more"] if more > 0 else []))


class Findings:
    """The errors found so far in one document, `path: message` each, in the order found.

    A rule either adds its message (`add`) or is one of the shared checks that raise
    `ConfigError` (`turnout.rules.text`, `turnout.aws.config_rules`, ...), run
    through `check`, which keeps its errors and tells whether it passed, so a rule
    that needs another's value checks it only when that one passed.
    """

    def __init__(self, errors: list[str] | None = None) -> None:
        self.errors: list[str] = list(errors or [])

    def add(self, message: str) -> None:
        """One error, `path: message`."""
        self.errors.append(message)

    def check(self, rule: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> bool:
        """Run `rule`; its `ConfigError` (every line of it) is kept, not raised.

        Returns:
            Whether it passed.
        """
        try:
            rule(*args, **kwargs)
        except ConfigError as exc:
            self.errors.extend(exc.errors)
            return False
        return True

    def raise_any(self) -> None:
        """Raise what was found, if anything.

        Raises:
            ConfigError: every error, one per line (`report`), listed in its `errors`.
        """
        if self.errors:
            raise ConfigError(report(self.errors), self.errors)
