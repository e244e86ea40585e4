"""SSRF guard rules for tenant custom endpoints (SPEC §6 "Custom endpoints").

Owns: which base URLs a tenant may register and which addresses Turnout may
connect to on a tenant's behalf: the URL checks (scheme, userinfo, host
names reserved for local networks, IP literals in every encoding) and the
address check applied to every resolved address at connect time by
`turnout.adapters.guarded`. Pure: no DNS, no sockets (resolution is the
caller's; `refused_addresses` checks its results).
Must not import: services, FastAPI, arq, httpx.

Refused: loopback, RFC 1918 private, CGNAT 100.64/10, link-local,
unspecified, multicast, broadcast and reserved ranges, IPv6 loopback / ULA
(fc00::/7) / link-local, IPv4-mapped and IPv4-compatible IPv6 forms, NAT64,
6to4 and Teredo addresses embedding a refused IPv4, cloud metadata
addresses and names, and IPv4 written in decimal, octal, hex or shortened
form (`http://2130706433/`, `http://0x7f.1/`, `http://017700000001/`,
`http://127.1/`). URLs with userinfo, non-http(s) schemes, zone ids or
non-ASCII characters are refused outright.

Egress policy: only `https` on ports 443 and 8443 unless the operator
widens it (the configuration's `egress:` section: `schemes`, `ports`,
`allow`). A base URL whose query carries a credential (`key`, `api_key`,
`token`, `secret`, `sig`, ...) is refused: the secret belongs in the
endpoint's `api_key` field, which is sealed, not in a URL that is shown.

The operator allow-list (`TURNOUT_SSRF_ALLOW` and `egress.allow`:
CIDRs and host names) admits on-prem endpoints; it never admits a metadata
address or name.

Refusals say why without DNS answers: a host name resolving to a refused
address is reported as such, its addresses replaced by `[address]`.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl

import msgspec
from yarl import URL

from turnout.scrub import strip_internals

ALLOW_ENV = "TURNOUT_SSRF_ALLOW"
DEFAULT_SCHEMES = frozenset({"https"})
DEFAULT_PORTS = frozenset({443, 8443})
CREDENTIAL_PARAMS = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "api-key",
        "x-api-key",
        "token",
        "access_token",
        "auth",
        "auth_token",
        "secret",
        "client_secret",
        "password",
        "sig",
        "signature",
        "x-goog-signature",
        "x-amz-signature",
        "code",
    }
)
"""Query parameter names (lowercase) that carry a credential: refused in a base URL."""


def query_credential(query: str) -> str | None:
    """The first parameter of a URL query string (`a=1&key=…`, undecoded) whose name carries a
    credential (`CREDENTIAL_PARAMS`), or None. Never the value: callers name the parameter only."""
    for name, _ in parse_qsl(query, keep_blank_values=True):
        if name.lower() in CREDENTIAL_PARAMS:
            return name
    return None


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_HOSTS = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
        "metadata.tencentyun.com",
        "metadata.packet.net",
    }
)
"""Cloud metadata service names; refused even when allow-listed."""

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.169.253",
        "fd00:ec2::254",
        "fd00:ec2::23",
        "100.100.100.200",
        "168.63.129.16",
        "192.0.0.192",
    )
)
"""AWS / GCP / Azure / Alibaba / Oracle metadata and wire-server addresses; never allowed."""

LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa", ".lan", ".intranet")
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "broadcasthost"})

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_V4_COMPAT = ipaddress.ip_network("::/96")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


class UnsafeURL(ValueError):
    """A base URL or address the SSRF guard refuses; the message says why."""


class AllowList(msgspec.Struct, frozen=True, kw_only=True):
    """The operator's egress policy for tenant endpoints: SSRF allow-list, schemes and ports.

    Attributes:
        networks: CIDRs whose addresses may be connected to.
        hosts: host names (lowercase, no trailing dot) that may be used and
            connected to whatever they resolve to (metadata excepted).
        schemes: URL schemes a base URL may use (default `https` only).
        ports: ports a base URL may name (its scheme's default when none is
            written); None = any port. Default 443 and 8443.
    """

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()
    schemes: frozenset[str] = DEFAULT_SCHEMES
    ports: frozenset[int] | None = DEFAULT_PORTS

    def widened(
        self, *, schemes: Iterable[str] = (), ports: Iterable[int] | None = (), entries: Iterable[str] = ()
    ) -> AllowList:
        """This policy with more schemes, ports (None: any) and allow-list entries (CIDRs, host names).

        Raises:
            ValueError: a malformed entry.
        """
        extra = AllowList.parse(",".join(entries))
        return AllowList(
            networks=self.networks + extra.networks,
            hosts=self.hosts | extra.hosts,
            schemes=self.schemes | {s.lower() for s in schemes},
            ports=None if ports is None or self.ports is None else self.ports | frozenset(ports),
        )

    @classmethod
    def parse(cls, value: str | None) -> AllowList:
        """Parse `10.0.0.0/8, 127.0.0.1, vllm.corp` (CIDRs, addresses, host names).

        Raises:
            ValueError: an entry is empty after stripping, or malformed.
        """
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for raw in (value or "").split(","):
            entry = raw.strip().lower().rstrip(".")
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                if not re.fullmatch(r"[a-z0-9_.-]+", entry):
                    raise ValueError(f"{ALLOW_ENV}: {raw.strip()!r} is neither a CIDR nor a host name") from None
                hosts.add(entry)
        return cls(networks=tuple(networks), hosts=frozenset(hosts))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AllowList:
        """The allow-list from `TURNOUT_SSRF_ALLOW` (empty when unset)."""
        return cls.parse((os.environ if env is None else env).get(ALLOW_ENV))

    def allows_ip(self, ip: IPAddress) -> bool:
        """True when `ip` is inside an allowed CIDR (metadata addresses never are)."""
        return ip not in METADATA_ADDRESSES and any(ip.version == n.version and ip in n for n in self.networks)

    def allows_host(self, host: str) -> bool:
        """True when the host name is allow-listed (metadata names never are)."""
        name = host.lower().rstrip(".")
        return name not in METADATA_HOSTS and name in self.hosts


_NOTHING_ALLOWED = AllowList()


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address carries, with what form carries it, or None.

    Returns:
        `("an IPv4-mapped IPv6 address", 169.254.169.254)` for `::ffff:169.254.169.254`;
        likewise IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`), 6to4
        (`2002::/16`) and Teredo (the client address) forms. None for any other address.
    """
    if ip.ipv4_mapped is not None:
        return "an IPv4-mapped IPv6 address", ip.ipv4_mapped
    if ip in _V4_COMPAT and int(ip) > 1:
        return "an IPv4-compatible IPv6 address", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64:
        return "a NAT64 address", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return "a 6to4 address", ip.sixtofour
    if ip.teredo is not None:
        return "a Teredo address", ip.teredo[1]
    return None


def address_refusal(ip: IPAddress, allow: AllowList) -> str | None:
    """Why Turnout must not connect to `ip` for a tenant, or None when it may.

    Args:
        ip: one address (a literal from a URL, or a resolved one).
        allow: the operator's allow-list.
    """
    if ip in METADATA_ADDRESSES:
        return f"{ip} is a cloud metadata address"
    if allow.allows_ip(ip):
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return f"{ip} carries a zone id"
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            what, v4 = embedded
            if what.startswith(("an IPv4-mapped", "an IPv4-compatible")):
                return f"{ip} is {what} (write the IPv4 address itself)"
            inner = address_refusal(v4, _NOTHING_ALLOWED)  # the allow-list names the plain address only
            if inner is not None:
                return f"{ip} is {what} embedding {inner}"
        if ip in _NAT64_LOCAL:
            return f"{ip} is a local-use NAT64 address"
    checks = (
        (ip.is_loopback, "a loopback address"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT, "a shared (CGNAT, 100.64.0.0/10) address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    )
    for refused, what in checks:
        if refused:
            return f"{ip} is {what}"
    return None


def parse_loose_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """`host` read the way `inet_aton` and the WHATWG URL parser read IPv4.

    Accepts 1 to 4 dot-separated parts, each decimal, octal (`0` prefix) or
    hex (`0x` prefix); the last part fills the remaining bytes
    (`127.1` = 127.0.0.1, `2130706433` = 127.0.0.1, `0x7f.1`).

    Returns:
        The address, or None when `host` is not such a form.
    """
    parts = host.split(".")
    if parts and parts[-1] == "":
        parts = parts[:-1]
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        if not part:
            return None
        try:
            if part.lower().startswith("0x"):
                value = int(part[2:] or "0", 16)
            elif len(part) > 1 and part.startswith("0"):
                value = int(part, 8)
            else:
                value = int(part, 10)
        except ValueError:
            return None
        values.append(value)
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for i, v in enumerate(head):
        number += v << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


def host_refusal(host: str, allow: AllowList) -> str | None:
    """Why a URL host (name or literal, as parsed) is refused, or None.

    A host whose last label is numeric is an IPv4 address (WHATWG URL): it
    must be in canonical dotted-quad form and itself allowed.
    """
    name = host.lower()
    if "%" in name:
        return f"host {host!r} carries a zone id or percent-encoding"
    bare = name.strip("[]")
    try:
        literal: IPAddress | None = ipaddress.ip_address(bare)
    except ValueError:
        literal = None
    if literal is not None:
        return address_refusal(literal, allow)
    name = name.rstrip(".")
    if not name:
        return "the URL has no host"
    if name in METADATA_HOSTS:
        return f"{name} is a cloud metadata service name"
    if allow.allows_host(name):
        return None
    if name in LOCAL_NAMES or name.endswith(LOCAL_SUFFIXES):
        return f"{name} is a name reserved for the local host or network"
    if _NUMERIC_LABEL.match(name.rsplit(".", 1)[-1]):
        v4 = parse_loose_ipv4(name)
        if v4 is None:
            return f"host {host!r} is neither a valid IPv4 address nor a host name"
        return f"host {host!r} is an encoded IPv4 address ({v4}); write it in dotted-quad form"
    if not re.fullmatch(r"[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*", name):
        return f"host {host!r} is not a valid host name"
    return None


def check_base_url(url: str, allow: AllowList) -> str:
    """Validate a custom endpoint base URL at registration (SPEC §6).

    Args:
        url: the URL as the tenant sent it.
        allow: the operator's allow-list.

    Returns:
        The URL without a trailing slash.

    Raises:
        UnsafeURL: the reason (scheme, userinfo, host, address).
    """
    if not url or not url.isascii() or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise UnsafeURL("the base URL must be non-empty ASCII without spaces (write an IDN host in punycode)")
    if "\\" in url:
        raise UnsafeURL("the base URL must not contain a backslash")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise UnsafeURL("the base URL must start with http:// or https://")
    if scheme.lower() not in allow.schemes:
        allowed = " or ".join(f"{s}://" for s in sorted(allow.schemes))
        raise UnsafeURL(f"the base URL must start with {allowed} (the operator's egress policy)")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        raise UnsafeURL("the base URL must not carry credentials (userinfo); register the key as `api_key`")
    try:
        parsed = URL(url)
        port = parsed.port
    except ValueError as exc:
        raise UnsafeURL(f"the base URL does not parse: {exc}") from None
    host = parsed.raw_host or ""
    if parsed.user is not None or parsed.password is not None:
        raise UnsafeURL("the base URL must not carry credentials (userinfo)")
    if port is not None and not 0 < port < 65536:
        raise UnsafeURL("the base URL's port is out of range")
    if allow.ports is not None and port not in allow.ports:
        allowed = ", ".join(str(p) for p in sorted(allow.ports))
        raise UnsafeURL(f"the base URL's port is not allowed (the operator's egress policy allows {allowed})")
    if parsed.fragment:
        raise UnsafeURL("the base URL must not carry a fragment")
    if query_credential(parsed.raw_query_string) is not None:
        raise UnsafeURL(
            "the base URL must not carry a secret in its query; put the secret in the endpoint's api_key field"
        )
    reason = host_refusal(host, allow)
    if reason is not None:
        raise UnsafeURL(reason)
    return url.rstrip("/")


def refused_addresses(host: str, addresses: Iterable[str], allow: AllowList) -> str | None:
    """Why connecting to `host` at any of its resolved `addresses` is refused, or None.

    Every address must pass (`address_refusal`), unless the host name is
    allow-listed (then only metadata addresses are refused). No address at
    all is refused too. The reason never shows a resolved address.
    """
    listed = allow.allows_host(host)
    seen = False
    for raw in addresses:
        seen = True
        ip = ipaddress.ip_address(raw.split("%", 1)[0])
        if listed:
            if ip in METADATA_ADDRESSES:
                return f"{host} resolves to a cloud metadata address"
            continue
        reason = address_refusal(ip, allow)
        if reason is not None:
            return f"{host} resolves to a refused address ({strip_internals(reason)})"  # no DNS answer shown
    return None if seen else f"{host} resolves to no address"
