"""The dashboard at a glance during a provider outage, rendered from real records and in headless Chromium.

A fleet whose `chat` model's first provider is down for `OUTAGE_S` seconds (the simulator's
`down<N>s`) gets steady traffic, streamed and not, through the outage and after it: its
breaker opens, a probe fails and it opens again, a probe succeeds and it closes, and the
traffic moves to the second provider and back. The pages are then read with the operator's
login (the header figures, the charts, the timeline, the transitions table, the client's
status on the request page, the over-budget flag), and shown in Chromium, whose screenshots
go to `docs/screenshots/` (kept small: PNG of the page's width, at most `SHOT_HEIGHT` px).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.dashboard import CHROMEDRIVER, CHROMIUM, browser, log_in
from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis
from support.tenancy import wait_for

pytestmark = pytest.mark.integration

OUTAGE_S = 24
OPERATOR = "op-glance-operator-Rt5Yu7Io9Pa1"
ADMIN = "tk-glance-acme-admin-Df3Gh5Jk7L"
USER = "tk-glance-acme-user-Zx2Cv4Bn6Mq"
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SHOT_HEIGHT = 1000

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a-0000000001}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b-0000000001}}
models:
  chat:
    order: priority
    offers:
      - {{provider: sim-a, model: "chat-a~down{outage}s+20ms", input_usd_per_mtok: 1, output_usd_per_mtok: 2}}
      - {{provider: sim-b, model: "chat-b~200+60ms", input_usd_per_mtok: 3, output_usd_per_mtok: 15}}
breaker: {{cooldown_s: 3, max_cooldown_s: 8}}
orgs:
  acme:
    settings: {{budget: {{usd: 0.00002, period: day}}}}
    keys:
      - {{name: admin, key: {admin}, admin: true}}
      - {{name: app, key: {user}}}
"""


def send(base: str, stream: bool) -> httpx.Response:
    body: dict[str, Any] = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    with httpx.Client(timeout=30) as client:
        r = client.post(f"{base}/v1/chat/completions", headers={"authorization": f"Bearer {USER}"}, json=body)
        r.read()
        return r


def traffic(base: str, seconds: float, every_s: float = 0.25) -> list[httpx.Response]:
    """Requests every `every_s` seconds for `seconds` (every third one streamed), from two threads."""
    got: list[httpx.Response] = []
    end = time.monotonic() + seconds

    def run(offset: int) -> None:
        i = offset
        while time.monotonic() < end:
            got.append(send(base, stream=i % 3 == 0))
            i += 2
            time.sleep(every_s)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


@pytest.fixture(scope="module")
def outage() -> Iterator[tuple[Gateway, list[httpx.Response]]]:
    require_redis()
    fleet = Fleet()
    try:
        env = {"TURNOUT_OPERATOR_KEY": OPERATOR, "TURNOUT_METRICS_PORT": "0"}
        gw = start_gateway(fleet, CONFIG, env=env, outage=str(OUTAGE_S), admin=ADMIN, user=USER)
        got = traffic(gw.base_url, OUTAGE_S + 14)
        yield gw, got
    finally:
        fleet.stop_all()


def fallback(got: list[httpx.Response]) -> httpx.Response:
    """A request that failed on sim-a and was served by sim-b."""
    return next(
        r for r in got if r.headers.get("x-turnout-fallback") == "1" and r.headers.get("x-turnout-attempts") != "1"
    )


def login(gw: Gateway, key: str = OPERATOR) -> httpx.Cookies:
    r = httpx.post(
        f"{gw.base_url}/ui/login", content=f"key={key}", headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert r.status_code == 303, r.text
    return r.cookies


def test_the_outage_is_told_by_the_timeline_and_the_figures(outage: tuple[Gateway, list[httpx.Response]]) -> None:
    gw, got = outage
    assert got and all(r.status_code == 200 for r in got), {r.status_code for r in got}
    cookies = login(gw)
    wait_for(
        lambda: "event-closed" in httpx.get(f"{gw.base_url}/ui/providers?window=2m", cookies=cookies).text,
        10,
        "the close recorded",
    )
    providers = httpx.get(f"{gw.base_url}/ui/providers?window=2m", cookies=cookies).text
    events = re.findall(r'<tr class="event-(\w+)">', providers)
    assert events[-1] == "opened" and "reopened" in events and events[0] == "closed", events  # newest first
    lane = providers.split('<figure class="lane" data-target="sim-a/')[1].split("</figure>")[0]
    states = re.findall(r'<g class="state (\w+)"><title>', lane)
    assert states[0] == "closed" and "open" in states and states[-1] == "closed", states
    markers = re.findall(r'<g class="marker (\w+)">', lane)
    assert markers[0] == "opened" and "reopened" in markers and markers[-1] == "closed", markers
    assert "Its traffic went to sim-b/chat-b~200+60ms" in lane
    activity = httpx.get(f"{gw.base_url}/ui/activity?window=2m", cookies=cookies).text
    assert 'id="chart-outcomes"' in activity and 'id="chart-latency"' in activity
    figures = dict(re.findall(r'<dd id="fig-(\w+)"[^>]*>([^<]*)</dd>', activity))
    assert float(figures["rps"]) > 0 and figures["errors"] == "0.0 %"
    assert figures["ttft"] != "— / —" and float(figures["fallbacks"]) > 0, figures
    live = httpx.get(f"{gw.base_url}/ui/activity?fragment=glance&window=2m", cookies=cookies).text
    assert live.lstrip().startswith("<section") and 'id="chart-outcomes"' in live and "<table" not in live
    assert (
        "default-src 'self'"
        in httpx.get(f"{gw.base_url}/ui/activity", cookies=cookies).headers["content-security-policy"]
    )


def test_the_request_page_shows_what_the_client_got(outage: tuple[Gateway, list[httpx.Response]]) -> None:
    gw, got = outage
    fell_back = fallback(got)
    page = httpx.get(f"{gw.base_url}/ui/requests/{fell_back.headers['x-request-id']}", cookies=login(gw)).text
    answer = re.search(r'<dd id="client-answer">(.*?)</dd>', page, re.DOTALL)
    assert answer and "<b>200</b>" in answer.group(1) and "served by sim-b/chat-b" in answer.group(1)
    assert re.search(r'<dd id="tokens">\d+ in, \d+ out</dd>', page)
    assert "end to end" in page and "upstream" in page


def test_spend_flags_the_budget_and_draws_the_days(outage: tuple[Gateway, list[httpx.Response]]) -> None:
    gw, _ = outage
    page = httpx.get(f"{gw.base_url}/ui/spend", cookies=login(gw, ADMIN)).text
    assert 'id="chart-spend"' in page and 'class="bar over"' in page
    assert "over budget</strong>" in page


@pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()), reason="no /usr/bin/chromium and chromedriver")
def test_screenshots_of_the_outage(outage: tuple[Gateway, list[httpx.Response]]) -> None:
    gw, got = outage
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver = browser(width=1100, height=SHOT_HEIGHT)
    try:
        log_in(driver, gw.base_url, OPERATOR)
        fell_back = fallback(got)
        for name, path in (
            ("activity", "/ui/activity?window=2m"),
            ("providers", "/ui/providers?window=2m#timeline"),
            ("request", f"/ui/requests/{fell_back.headers['x-request-id']}"),
        ):
            driver.get(gw.base_url + path)
            assert not driver.get_log("browser") or all(
                "Content Security Policy" not in e["message"] for e in driver.get_log("browser")
            )
            driver.save_screenshot(str(SHOTS / f"glance-{name}.png"))
        driver.delete_all_cookies()
        log_in(driver, gw.base_url, ADMIN)
        driver.get(gw.base_url + "/ui/spend")
        driver.save_screenshot(str(SHOTS / "glance-spend.png"))
    finally:
        driver.quit()
    for shot in SHOTS.glob("glance-*.png"):
        assert 0 < shot.stat().st_size < 400_000, shot
    if os.environ.get("CI") == "true":
        return
