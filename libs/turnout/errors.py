"""The exception tree of Turnout.

    TurnoutError
    ├── ConfigError        a configuration file or setting is invalid (path named)
    ├── RequestRejected    the client's request is refused before any upstream call
    │                      (HTTP status, OpenAI error type / code / param)
    └── GatewayUnavailable the fleet cannot take the job now (Redis down, queue
                           full, no worker in time): 503 with Retry-After

Upstream failures are not exceptions here: adapters map every foreign error
once into an `Outcome` value (see `turnout.core.types`) and the loop decides.
Class names become `error.type` in traces.
"""

from __future__ import annotations


class TurnoutError(Exception):
    """Base of every error Turnout raises on purpose."""


class ConfigError(TurnoutError):
    """Invalid configuration; the message starts with the offending path.

    Attributes:
        errors: each error of the file, `path: message` (one, unless the
            type errors of a whole file were collected at once).
    """

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.errors = list(errors) if errors else [message]


class RequestRejected(TurnoutError):
    """A client error answered by the gateway itself (nothing enqueued).

    Attributes:
        status_code: HTTP status (400, 401, 404, 413, 422, ...).
        error_type: OpenAI `error.type` (`invalid_request_error`, ...).
        code: OpenAI `error.code`, or None.
        param: the offending request field, or None.
        headers: extra response headers (a limit's `retry-after`, `x-ratelimit-*`).
    """

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        error_type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.error_type = error_type
        self.code = code
        self.param = param
        self.headers = dict(headers or {})


class GatewayUnavailable(TurnoutError):
    """The fleet cannot serve now; the client should retry later.

    Attributes:
        retry_after_s: whole seconds for the `Retry-After` header.
        code: a stable error code (`queue_full`, `redis_unavailable`, `no_worker`).
    """

    def __init__(self, message: str, *, retry_after_s: int, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s
        self.code = code
