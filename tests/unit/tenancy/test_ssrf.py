"""The SSRF guard (SPEC §6): hostile base URLs refused at registration and at connect time."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from turnout.adapters.base import CallSpec
from turnout.adapters.exchange import call_json
from turnout.adapters.guarded import REFUSED, make_guarded_client
from turnout.adapters.transport import direct_transport, transport_error_of
from turnout.config import egress_policy, parse_config
from turnout.core.types import Target, TransportError
from turnout.errors import ConfigError
from turnout.rules.ssrf import (
    AllowList,
    UnsafeURL,
    address_refusal,
    check_base_url,
    parse_loose_ipv4,
    refused_addresses,
)

HOSTILE_FILE = Path(__file__).resolve().parents[2] / "data" / "hostile_urls.txt"
HOSTILE = [
    line.strip()
    for line in HOSTILE_FILE.read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]
TEST_ALLOW = AllowList.parse("127.0.0.1").widened(schemes=["http"], ports=None)
ANY_HTTP = AllowList().widened(schemes=["http"], ports=None)  # the egress policy widened, the SSRF rules alone


def test_the_hostile_list_is_long_enough() -> None:
    assert len(HOSTILE) >= 60
    assert len(set(HOSTILE)) == len(HOSTILE)


@pytest.mark.parametrize("url", HOSTILE)
@pytest.mark.parametrize(
    "allow", [AllowList(), ANY_HTTP, TEST_ALLOW], ids=["default-policy", "any-scheme-and-port", "allow-127.0.0.1"]
)
def test_hostile_base_url_is_refused(url: str, allow: AllowList) -> None:
    with pytest.raises(UnsafeURL):
        check_base_url(url, allow)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1",
        "https://api.groq.com/openai/v1/",
        "https://8.8.8.8:8443/v1",
        "https://[2606:4700:4700::1111]/v1",
        "https://east.example.com/openai?api-version=2024-10-21",
        "https://api.example.com/v1/user@team",
        "HTTPS://API.EXAMPLE.COM/v1",
    ],
)
def test_public_base_url_is_accepted(url: str) -> None:
    assert check_base_url(url, AllowList()) == url.rstrip("/")


@pytest.mark.parametrize(
    ("allow", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8000/v1"),
        ("10.0.0.0/8", "http://10.0.0.5:8000/v1"),
        ("10.0.0.0/8, fd00::/8", "http://[fd12::1]/v1"),
        ("vllm.corp", "http://vllm.corp:8000/v1"),
        ("printer.local", "http://printer.local/v1"),
    ],
)
def test_allow_list_admits_on_prem_endpoints(allow: str, url: str) -> None:
    assert check_base_url(url, AllowList.parse(allow).widened(schemes=["http"], ports=None))


@pytest.mark.parametrize(
    ("allow", "url"),
    [
        ("169.254.0.0/16", "http://169.254.169.254/"),
        ("0.0.0.0/0", "http://169.254.169.254/"),
        ("fd00::/8", "http://[fd00:ec2::254]/"),
        ("metadata.google.internal", "http://metadata.google.internal/"),
        ("127.0.0.1", "http://2130706433/"),
        ("127.0.0.1", "http://[::ffff:127.0.0.1]/"),
    ],
)
def test_allow_list_never_admits_metadata_or_encoded_forms(allow: str, url: str) -> None:
    with pytest.raises(UnsafeURL):
        check_base_url(url, AllowList.parse(allow).widened(schemes=["http"], ports=None))


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://api.example.com/v1", "must start with https://"),
        ("https://api.example.com:8000/v1", "port is not allowed"),
        ("https://api.example.com:25/v1", "port is not allowed"),
        ("https://api.example.com/v1?key=AIzaSecret", "put the secret in the endpoint's api_key field"),
        ("https://api.example.com/v1?api-version=1&API_KEY=x", "api_key field"),
        ("https://api.example.com/v1?sig=abc", "api_key field"),
        ("https://user:pw@api.example.com/v1", "credentials"),
    ],
    ids=["http", "port-8000", "port-25", "query-key", "query-api-key-any-case", "query-sig", "userinfo"],
)
def test_the_default_egress_policy_is_https_on_443_and_8443_without_secrets_in_the_url(url: str, why: str) -> None:
    with pytest.raises(UnsafeURL, match=why.replace("(", r"\(")):
        check_base_url(url, AllowList())
    assert check_base_url("https://api.example.com:8443/v1", AllowList())
    assert check_base_url("https://api.example.com/v1?api-version=2024-10-21", AllowList())


def test_the_operator_widens_schemes_and_ports() -> None:
    wide = AllowList().widened(schemes=["http"], ports=[8000])
    assert check_base_url("http://api.example.com:8000/v1", wide)
    with pytest.raises(UnsafeURL, match="allows 443, 8000, 8443"):
        check_base_url("http://api.example.com:9000/v1", wide)
    assert check_base_url("http://api.example.com:9000/v1", wide.widened(ports=None))


def test_a_resolution_refusal_says_why_without_the_addresses() -> None:
    for answer in (["10.0.0.5"], ["8.8.8.8", "127.0.0.1"], ["2002:a00:1::"], ["169.254.169.254"]):
        reason = refused_addresses("vllm.example", answer, AllowList())
        assert reason is not None and reason.startswith("vllm.example resolves to a ")
        assert not any(a in reason for a in answer) and "10.0.0.1" not in reason


def test_allow_list_refuses_a_malformed_entry() -> None:
    with pytest.raises(ValueError, match="TURNOUT_SSRF_ALLOW"):
        AllowList.parse("10.0.0.0/8, not a host!")


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("10.0.1", "10.0.0.1"),
        ("8.8.8.8", "8.8.8.8"),
        ("0", "0.0.0.0"),
        ("4294967295", "255.255.255.255"),
        ("4294967296", None),
        ("256.1.1.1", None),
        ("1.2.3.4.5", None),
        ("08.1.1.1", None),
        ("0xg.1", None),
        ("example.com", None),
        ("", None),
    ],
)
def test_loose_ipv4_reads_what_inet_aton_reads(host: str, expected: str | None) -> None:
    parsed = parse_loose_ipv4(host)
    assert (str(parsed) if parsed is not None else None) == expected


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.20.0.1",
        "192.168.0.10",
        "100.64.0.1",
        "169.254.10.10",
        "0.0.0.0",
        "224.0.0.5",
        "::1",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",
        "::ffff:8.8.8.8",
        "::",
        "64:ff9b::7f00:1",
    ],
)
def test_resolved_address_check_refuses_non_public(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address), AllowList()) is not None


def test_resolved_addresses_any_refused_refuses_the_host() -> None:
    assert refused_addresses("rebind.example", ["8.8.8.8", "127.0.0.1"], AllowList()) is not None
    assert refused_addresses("ok.example", ["8.8.8.8", "2606:4700::1111"], AllowList()) is None
    assert refused_addresses("vllm.corp", ["10.0.0.5"], AllowList.parse("vllm.corp")) is None
    assert refused_addresses("vllm.corp", ["169.254.169.254"], AllowList.parse("vllm.corp")) is not None
    assert refused_addresses("empty.example", [], AllowList()) is not None


class FixedResolver(AbstractResolver):
    """Resolves every name to one address (what a hostile DNS answer would do)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        return [
            {
                "hostname": host,
                "host": self.address,
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        return None


@pytest.fixture
async def local_server() -> AsyncIterator[tuple[str, list[str]]]:
    """A plain HTTP server on 127.0.0.1 that records every request path."""
    hits: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"127.0.0.1:{port}", hits
    finally:
        await runner.cleanup()


async def test_guarded_client_refuses_a_loopback_literal_before_connecting(local_server: tuple[str, list[str]]) -> None:
    hostport, hits = local_server
    async with make_guarded_client(max_connections=4, allow=ANY_HTTP) as client:
        with pytest.raises(httpx.ConnectError, match=REFUSED) as info:
            await client.post(f"http://{hostport}/v1/chat/completions", content=b"{}")
    assert hits == []
    assert transport_error_of(info.value) is TransportError.CONNECT


async def test_a_json_attempt_through_the_guarded_client_is_refused_too(local_server: tuple[str, list[str]]) -> None:
    """`call_json` skips httpx's layers only for the shared client (`direct_transport`): the guard stays."""
    hostport, hits = local_server
    spec = CallSpec(
        target=Target(provider="p", model="m", catalog_model="m"),
        base_url=f"http://{hostport}/v1/",
        api_key="sk-test",
        body=b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}',
        timeout_s=5.0,
        request_id="rid-1",
        kind="openai_compatible",
    )
    async with make_guarded_client(max_connections=4, allow=ANY_HTTP) as client:
        assert direct_transport(client) is None
        result = await call_json(client, spec)
    assert hits == []
    assert result.outcome.transport is TransportError.CONNECT


async def test_guarded_client_refuses_a_name_resolving_to_loopback_at_connect_time(
    local_server: tuple[str, list[str]],
) -> None:
    hostport, hits = local_server
    port = hostport.rsplit(":", 1)[1]
    resolver = FixedResolver("127.0.0.1")  # DNS rebinding: a public-looking name answering 127.0.0.1
    async with make_guarded_client(max_connections=4, allow=ANY_HTTP, resolver=resolver) as client:
        with pytest.raises(httpx.TransportError, match=REFUSED) as info:
            await client.post(f"http://rebind.example.com:{port}/v1/chat/completions", content=b"{}")
    assert transport_error_of(info.value) is TransportError.CONNECT
    assert resolver.asked == ["rebind.example.com"] and hits == []


async def test_guarded_client_connects_where_the_allow_list_says(local_server: tuple[str, list[str]]) -> None:
    hostport, hits = local_server
    async with make_guarded_client(max_connections=4, allow=TEST_ALLOW) as client:
        response = await client.post(f"http://{hostport}/v1/chat/completions", content=b"{}")
    assert response.status_code == 200 and hits == ["/v1/chat/completions"]


async def test_guarded_client_never_follows_a_redirect(local_server: tuple[str, list[str]]) -> None:
    _hostport, _ = local_server

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")

    app = web.Application()
    app.router.add_get("/", redirect)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with make_guarded_client(max_connections=4, allow=TEST_ALLOW) as client:
            response = await asyncio.wait_for(client.get(f"http://127.0.0.1:{port}/"), 5)
        assert response.status_code == 302
    finally:
        await runner.cleanup()


EGRESS_BASE = """
providers:
  a: {kind: openai_compatible, base_url: "https://a.example/v1", api_key: ka}
models:
  m1: {offers: [{provider: a, model: m1}]}
"""


def test_the_egress_section_widens_the_default_policy() -> None:
    base = EGRESS_BASE
    default = egress_policy(parse_config(base, env={}), {})
    assert default.schemes == {"https"} and default.ports == frozenset({443, 8443}) and not default.networks
    wide = egress_policy(
        parse_config(base + "egress: {schemes: [http], ports: any, allow: [10.0.0.0/8]}\n", env={}),
        {"TURNOUT_SSRF_ALLOW": "vllm.corp"},
    )
    assert wide.schemes == {"http", "https"} and wide.ports is None
    assert wide.hosts == {"vllm.corp"} and [str(n) for n in wide.networks] == ["10.0.0.0/8"]
    for bad, path in (
        ("egress: {ports: [70000]}", "egress.ports"),
        ("egress: {allow: ['a b']}", "egress.allow"),
        ("egress: {schemes: [ftp]}", "egress.schemes"),
    ):
        with pytest.raises(ConfigError, match="^" + re.escape(path)):
            parse_config(base + bad + "\n", env={})
