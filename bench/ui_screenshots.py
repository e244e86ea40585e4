#!/usr/bin/env python3
"""Regenerate the dashboard screenshots in `docs/` (one command, about a minute).

Starts the dashboard test fleet (`tests/support/dashboard.py`: redis, the
simulator, a worker, an ingress), sends traffic that retries, falls back and
opens a breaker, keeps the Providers page open for about 40 s so the score
sparklines get a few samples, and saves a PNG of each page from the
system's headless Chromium (`/usr/bin/chromium`, `/usr/bin/chromedriver`).

Usage: .venv/bin/python bench/ui_screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.dashboard import (
    ACME_USER,
    BETA_ADMIN,
    BETA_USER,
    OPERATOR,
    browser,
    chat,
    log_in,
    make_traffic,
    start_dashboard,
)
from support.echo_upstream import EchoUpstream
from support.procs import Fleet

SAMPLING_S = 40.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    echo, fleet = EchoUpstream(), Fleet()
    driver = None
    try:
        gw = start_dashboard(fleet, echo)
        driver = browser(1360, 820)
        driver.get(f"{gw.base_url}/ui/login")
        driver.save_screenshot(str(args.out / "ui-login.png"))
        log_in(driver, gw.base_url, OPERATOR)
        driver.get(f"{gw.base_url}/ui/providers")
        ids = make_traffic(gw)
        started = time.monotonic()
        rounds = 0
        while time.monotonic() - started < SAMPLING_S:  # the open page samples scores every 10 s
            chat(gw.base_url, BETA_USER, "small")
            chat(gw.base_url, ACME_USER, "chat" if rounds % 3 else "small")
            if rounds % 5 == 4:
                chat(gw.base_url, BETA_USER, "leaky")
            rounds += 1
            time.sleep(1.5)
        driver.get(f"{gw.base_url}/ui/providers")
        driver.save_screenshot(str(args.out / "ui-providers.png"))
        driver.get(f"{gw.base_url}/ui/activity")
        driver.save_screenshot(str(args.out / "ui-activity.png"))
        driver.get(f"{gw.base_url}/ui/requests/{ids['fallback']}")
        driver.save_screenshot(str(args.out / "ui-request.png"))
        driver.get(f"{gw.base_url}/ui/spend")
        driver.save_screenshot(str(args.out / "ui-spend.png"))
        driver.delete_all_cookies()
        log_in(driver, gw.base_url, BETA_ADMIN)
        driver.save_screenshot(str(args.out / "ui-activity-org-admin.png"))
        print("\n".join(str(p) for p in sorted(args.out.glob("ui-*.png"))))
    finally:
        if driver is not None:
            driver.quit()
        fleet.stop_all()
        echo.stop()


if __name__ == "__main__":
    main()
