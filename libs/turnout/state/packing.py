"""Redis commands packed by hiredis, as redis-py's own synchronous client packs them.

Owns: `hiredis_packing`, the connection class a `BufferCheckedPool`
(`turnout.state.pool`) makes its connections of.

Why: redis-py 5.x's asyncio connection packs every command in Python
(`redis.asyncio.connection.AbstractConnection.pack_command`: an encoder call
and a few joins per argument), while its synchronous connection hands the
arguments to hiredis's C packer (`redis.connection.HiredisRespSerializer`)
whenever hiredis is installed. hiredis is already the reply parser of every
Turnout client. Measured on this machine for the records append's eleven
arguments: 5.7 µs in Python, 0.8 µs in hiredis, same bytes; a queued request
sends four to six commands from the worker and one or two from the ingress
(bench/README.md, "Commands packed by hiredis").

Same bytes, same errors: a command name of several words (`"CONFIG GET"`) is
split as redis-py splits it, and an argument of a type Redis cannot take
(`None`, `bool`, `bytearray`) goes to the Python packer, which raises its
`redis.exceptions.DataError` naming the type. A connection whose encoder is
not UTF-8 with strict errors (the client's `encoding` / `encoding_errors`
options) keeps the Python packer, since hiredis always encodes text as UTF-8.
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

from typing import Any

from hiredis import pack_command as _hiredis_pack
from redis.asyncio.connection import AbstractConnection

_CLASSES: dict[type[AbstractConnection], type[AbstractConnection]] = {}
"""The packing subclass made for each connection class (a handful: TCP, TLS, Unix socket)."""


class _HiredisPacking:
    """Mixin for a redis-py asyncio connection class: `pack_command` by hiredis (module doc)."""

    _utf8_strict: bool | None = None

    def pack_command(self, *args: Any) -> list[bytes]:
        """The command `args` in the Redis protocol, as one chunk (see `AbstractConnection.pack_command`).

        Raises:
            redis.exceptions.DataError: an argument that is not str, bytes, int, float or
                memoryview (the Python packer's error).
        """
        utf8_strict = self._utf8_strict
        if utf8_strict is None:
            encoder = self.encoder  # type: ignore[attr-defined]
            utf8_strict = self._utf8_strict = (
                encoder.encoding.replace("_", "-").lower() in ("utf-8", "utf8") and encoder.encoding_errors == "strict"
            )
        if not utf8_strict:
            return super().pack_command(*args)  # type: ignore[misc,no-any-return]
        name = args[0]
        if isinstance(name, str):
            args = (*name.encode().split(), *args[1:])
        elif b" " in name:
            args = (*name.split(), *args[1:])
        try:
            return [_hiredis_pack(args)]
        except TypeError:  # the Python packer raises its own DataError, naming the argument's type
            return super().pack_command(*args)  # type: ignore[misc,no-any-return]


def hiredis_packing(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """`connection_class`, or a subclass of it whose commands hiredis packs (module doc).

    The class itself when it already packs so.
    """
    if issubclass(connection_class, _HiredisPacking):
        return connection_class
    made = _CLASSES.get(connection_class)
    if made is None:
        made = _CLASSES[connection_class] = type(
            f"HiredisPacking{connection_class.__name__}", (_HiredisPacking, connection_class), {}
        )
    return made
