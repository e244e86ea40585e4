"""A fleet for the dashboard's browser tests and screenshots, and a headless browser.

Owns: the dashboard fleet's configuration (two orgs, a model whose first
provider is hard down so requests retry and fall back and its breaker opens,
a provider that quotes the key it is sent, canary keys), traffic that makes
each page worth looking at, and a Chromium driven by selenium from the
system's `/usr/bin/chromium` and `/usr/bin/chromedriver` (nothing is
downloaded at run time).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import httpx
from cryptography.fernet import Fernet

from support.echo_upstream import EchoUpstream
from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis

CHROMIUM = Path(os.environ.get("TURNOUT_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("TURNOUT_CHROMEDRIVER", "/usr/bin/chromedriver"))

OPERATOR = "op-dash-operator-Rt5Yu7Io9Pa1"
ACME_ADMIN = "tk-dash-acme-admin-Df3Gh5Jk7L"
ACME_USER = "tk-dash-acme-user-Zx2Cv4Bn6Mq"
BETA_ADMIN = "tk-dash-beta-admin-Wq8Er0Ty2U"
BETA_USER = "tk-dash-beta-user-Hj6Kl8Zx0Cv"
PLATFORM = "sk-dash-platform-Nm3Bv5Cx7Zq9Lk1"
BYOK = "sk-dash-byok-Pq4Wo6Ei8Ru0Ty2"
CANARIES = [OPERATOR, ACME_ADMIN, ACME_USER, BETA_ADMIN, BETA_USER, PLATFORM, BYOK]

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: "${{PLATFORM_CANARY}}"}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b-0000000001}}
  leak: {{kind: openai_compatible, base_url: "{echo}/v1", api_key: "${{PLATFORM_CANARY}}"}}
models:
  chat:
    order: priority
    offers:
      - {{provider: sim-a, model: "chat-a~503", input_usd_per_mtok: 1, output_usd_per_mtok: 2}}
      - {{provider: sim-b, model: chat-b, input_usd_per_mtok: 3, output_usd_per_mtok: 15}}
  small: {{offers: [{{provider: sim-b, model: small-b, input_usd_per_mtok: 0.5, output_usd_per_mtok: 1}}]}}
  leaky: {{offers: [{{provider: leak, model: leak-html}}]}}
breaker: {{cooldown_s: 60, max_cooldown_s: 120}}
egress: {{schemes: [http], ports: any}}
orgs:
  acme:
    provider_keys: {{sim-b: "${{BYOK_CANARY}}"}}
    squads:
      research: {{settings: {{budget: {{usd: 250, period: month}}}}}}
    keys:
      - {{name: admin, key: {acme_admin}, admin: true}}
      - {{name: ci-bot, squad: research, key: {acme_user}}}
  beta:
    keys:
      - {{name: admin, key: {beta_admin}, admin: true}}
      - {{name: app, key: {beta_user}}}
"""


def browser_available() -> bool:
    """True when the system's Chromium and its driver are installed."""
    return CHROMIUM.exists() and CHROMEDRIVER.exists() and shutil.which("redis-server") is not None


def start_dashboard(fleet: Fleet, echo: EchoUpstream, env: dict[str, str] | None = None) -> Gateway:
    """Redis, simulator, one worker and an ingress with the dashboard configuration."""
    require_redis()
    environ = {
        "TURNOUT_OPERATOR_KEY": OPERATOR,
        "TURNOUT_SECRET_KEY": Fernet.generate_key().decode(),
        "TURNOUT_SSRF_ALLOW": "127.0.0.1",
        "TURNOUT_METRICS_PORT": "0",
        "PLATFORM_CANARY": PLATFORM,
        "BYOK_CANARY": BYOK,
        "TURNOUT_UI_TRACE_URL": "http://traces.example/search?request_id={request_id}",
        **(env or {}),
    }
    return start_gateway(
        fleet,
        CONFIG,
        env=environ,
        echo=echo.url,
        acme_admin=ACME_ADMIN,
        acme_user=ACME_USER,
        beta_admin=BETA_ADMIN,
        beta_user=BETA_USER,
    )


def chat(base_url: str, key: str, model: str) -> httpx.Response:
    """One non-streaming chat completion."""
    return httpx.post(
        f"{base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )


def health(base_url: str, key: str) -> list[dict[str, Any]]:
    """`GET /v1/health/providers` rows for an admin key."""
    rows: list[dict[str, Any]] = httpx.get(
        f"{base_url}/v1/health/providers",
        headers={"authorization": f"Bearer {key}"},
        timeout=10,
    ).json()["data"]
    return rows


def make_traffic(gw: Gateway) -> dict[str, str]:
    """Requests that fill every page: acme's fall back (and open sim-a's breaker), beta's are served at once.

    Returns:
        The request ids of one acme fallback request (`fallback`) and one beta request (`beta`).
    """
    ids: dict[str, str] = {}
    for _ in range(3):
        r = chat(gw.base_url, ACME_USER, "chat")
        assert r.status_code == 200, r.text
        ids.setdefault("fallback", r.headers["x-request-id"])
    for _ in range(2):
        r = chat(gw.base_url, BETA_USER, "small")
        assert r.status_code == 200, r.text
        ids.setdefault("beta", r.headers["x-request-id"])
    chat(gw.base_url, BETA_USER, "leaky")
    chat(gw.base_url, ACME_ADMIN, "small")
    return ids


def browser(width: int = 1360, height: int = 900) -> Any:
    """A headless Chromium (selenium WebDriver) on the system's browser and driver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--disable-extensions",
        "--no-first-run",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)


def log_in(driver: Any, base_url: str, key: str, timeout_s: float = 15.0) -> None:
    """Log in through the form (the key is typed, never put in a URL); returns once the answer page is loaded.

    The answer is Activity (logged in) or the form again with `#login-error`.
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base_url}/ui/login")
    form = driver.find_element(By.ID, "key")
    form.send_keys(key)
    driver.find_element(By.ID, "login").click()
    WebDriverWait(driver, timeout_s, poll_frequency=0.05).until(
        lambda d: d.current_url.endswith("/ui/activity") or d.find_elements(By.ID, "login-error"),
        message="the login's answer",
    )
