#!/usr/bin/env python3
"""Screenshots of the dashboard's Settings pages in `docs/` (one command, about 20 s): a key's
fallbacks edited, the review's diff, the saved form, and the next request following them.

Starts the dashboard test fleet (`tests/support/dashboard.py`), logs in as acme's admin, gives the
key `ci-bot` the model fallback `chat: small` and turns its cross-provider fallback off (so the
fallback model is what serves when `chat`'s first provider fails), reviews, saves, sends one
request with that key and opens its page, saving a PNG of each step from the system's headless
Chromium.

Usage: .venv/bin/python bench/ui_settings_screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from support.dashboard import ACME_ADMIN, ACME_USER, browser, chat, log_in, start_dashboard
from support.echo_upstream import EchoUpstream
from support.gateway import Gateway
from support.procs import Fleet

WIDTH = 1360


def shot(driver: Any, path: Path) -> None:
    """The whole page (the window grown to its height) as a PNG."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WIDTH, max(600, min(int(height) + 40, 4000)))
    driver.save_screenshot(str(path))


def until(driver: Any, element_id: str) -> Any:
    """The element `element_id` once the page that holds it is loaded."""
    return WebDriverWait(driver, 15, poll_frequency=0.05).until(
        lambda d: d.find_elements(By.ID, element_id), message=element_id
    )[0]


@contextlib.contextmanager
def dashboard_and_browser() -> Iterator[tuple[Gateway, Any]]:
    """The dashboard fleet and a headless Chromium, both stopped on the way out."""
    echo, fleet = EchoUpstream(), Fleet()
    driver = None
    try:
        gw = start_dashboard(fleet, echo)
        driver = browser(WIDTH, 900)
        yield gw, driver
    finally:
        if driver is not None:
            driver.quit()
        fleet.stop_all()
        echo.stop()


def edit_and_follow(gw: Gateway, driver: Any, out: Path) -> None:
    """Edit ci-bot's fallbacks as acme's admin, review, save, send a request; a PNG of each step."""
    log_in(driver, gw.base_url, ACME_ADMIN)
    driver.get(f"{gw.base_url}/ui/settings/acme/keys/ci-bot")
    until(driver, "settings-form")
    fallbacks = driver.find_element(By.NAME, "fallbacks")
    fallbacks.clear()
    fallbacks.send_keys("chat: small")
    Select(driver.find_element(By.NAME, "policy.fallback.cross_provider_same_model")).select_by_value("false")
    shot(driver, out / "ui-settings.png")
    driver.find_element(By.ID, "review").click()
    until(driver, "diff")
    shot(driver, out / "ui-settings-review.png")
    driver.find_element(By.ID, "confirm").click()
    until(driver, "saved")
    shot(driver, out / "ui-settings-saved.png")
    answer = chat(gw.base_url, ACME_USER, "chat")
    assert answer.status_code == 200, answer.text
    print("served by", answer.headers["x-turnout-provider"], answer.headers["x-turnout-model"])
    for _ in range(50):  # the last attempt's record is written just after the answer
        driver.get(f"{gw.base_url}/ui/requests/{answer.headers['x-request-id']}")
        if "in_flight" not in until(driver, "attempts").text:
            break
        time.sleep(0.2)
    shot(driver, out / "ui-settings-request.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs")
    out: Path = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    with dashboard_and_browser() as (gw, driver):
        edit_and_follow(gw, driver, out)
    print("\n".join(str(p) for p in sorted(out.glob("ui-settings*.png"))))


if __name__ == "__main__":
    main()
