"""A catalog swap never mixes two catalogs inside one request: the router over a `LiveCatalog`."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from support.answers import OPENAI_COMPLETION
from turnout.catalog.live import LiveCatalog
from turnout.config import Config, ProviderConfig, parse_config
from turnout.core.plan import RoutingSettings, UnknownModel
from turnout.router import RequestInfo, Router

CONFIG = parse_config(
    """
providers:
  pa: {kind: openai_compatible, base_url: "https://old.test/v1", api_key: sk-old-key-0001}
models:
  m: {offers: [{provider: pa, model: m}]}
  other: {offers: [{provider: pa, model: other}]}
""",
    env={},
)


def moved(config: Config) -> Config:
    """The catalog after an edit: provider `pa` at a new URL with a new key, model `m` removed."""
    raw = msgspec.structs.replace(
        config.raw,
        providers={
            "pa": ProviderConfig(kind="openai_compatible", base_url="https://new.test/v1", api_key="sk-new-key-0002")
        },
        models={"other": config.raw.models["other"]},
    )
    return msgspec.structs.replace(config, raw=raw)


def completion(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=OPENAI_COMPLETION)


@pytest.fixture
def calls() -> list[httpx.Request]:
    return []


@pytest.fixture
async def router(calls: list[httpx.Request]) -> Any:
    def record(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return completion(request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as http:
        live = LiveCatalog(CONFIG)
        yield Router(catalog=live, http=http), live


async def test_a_request_planned_before_a_swap_finishes_on_its_own_catalog(
    router: tuple[Router, LiveCatalog], calls: list[httpx.Request]
) -> None:
    r, live = router
    snapshot = r.catalog
    plan, view = await r.plan("m", RoutingSettings(), CONFIG.policy, catalog=snapshot)
    live.swap(moved(CONFIG), 2)  # arrives while the request is in flight
    info = RequestInfo(request_id="r1", requested_model="m")
    result = await r.route(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        plan=plan,
        view=view,
        policy=CONFIG.policy,
        time_left_s=30,
        info=info,
        catalog=snapshot,
    )
    assert result.verdict is None
    assert [c.url.host for c in calls] == ["old.test"]
    assert calls[0].headers["authorization"] == "Bearer sk-old-key-0001"


async def test_a_request_after_the_swap_sees_only_the_new_catalog(
    router: tuple[Router, LiveCatalog], calls: list[httpx.Request]
) -> None:
    r, live = router
    live.swap(moved(CONFIG), 2)
    with pytest.raises(UnknownModel):
        await r.plan("m", RoutingSettings(), CONFIG.policy)
    plan, view = await r.plan("other", RoutingSettings(), CONFIG.policy)
    info = RequestInfo(request_id="r2", requested_model="other")
    result = await r.route(
        {"model": "other", "messages": [{"role": "user", "content": "hi"}]},
        plan=plan,
        view=view,
        policy=CONFIG.policy,
        time_left_s=30,
        info=info,
    )
    assert result.verdict is None
    assert [c.url.host for c in calls] == ["new.test"]
    assert calls[0].headers["authorization"] == "Bearer sk-new-key-0002"
