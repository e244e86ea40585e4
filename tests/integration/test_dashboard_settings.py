"""Editing routing settings from the dashboard against a real fleet (#45 item 8).

A key's fallback models edited through the settings form (review, then confirm) are what the
admin API reads and what the next request follows; a POST without the session's CSRF token, or
with another, is a 403 that changes nothing; an org admin's change above the operator's ceiling is
refused naming the ceiling, with the admin API's own words; the save is an audit entry like the
admin API's. Then in a headless Chromium: log in, edit a policy field, see the diff, confirm, see
the new value (skipped without the system's Chromium, except in CI).
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from cryptography.fernet import Fernet

from support.dashboard import browser, browser_available, log_in
from support.gateway import Gateway, start_gateway
from support.procs import Fleet, require_redis
from support.tenancy import Admin, chat, wait_for

pytestmark = pytest.mark.integration

OPERATOR = "op-settings-operator-Qw3Er5Ty7Ui9"
ACME_ADMIN = "tk-settings-acme-admin-As2Df4Gh6J"
ACME_BOT = "tk-settings-acme-bot-Zx1Cv3Bn5Mq"
BETA_ADMIN = "tk-settings-beta-admin-Lk8Jh6Gf4D"
ACME_TEMP = "tk-settings-acme-temp-Pq9Wn2Vb4X"
ACME_RUNNER = "tk-settings-acme-runner-Ty6Re4Wq2Z"
BYOK_SECRET = "sk-byok-dashboard-canary-7Hq2Lm9Xc4Vb"

CONFIG = """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a-0000000001}}
  sim-b: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-b-0000000001}}
models:
  down: {{offers: [{{provider: sim-a, model: "down-a~503"}}]}}
  small: {{offers: [{{provider: sim-b, model: small-b}}]}}
policy: {{retry: {{max_retries: 0}}}}
orgs:
  acme:
    settings: {{limits: {{rpm: 600}}}}
    squads:
      research: {{settings: {{budget: {{usd: 250, period: month}}}}}}
      ops: {{}}
    keys:
      - {{name: admin, key: {acme_admin}, admin: true}}
      - {{name: bot, squad: research, key: {acme_bot}}}
      - {{name: temp, key: {acme_temp}}}
      - {{name: runner, key: {acme_runner}}}
  beta:
    keys:
      - {{name: admin, key: {beta_admin}, admin: true}}
"""
FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(
            fleet,
            CONFIG,
            env={
                "TURNOUT_OPERATOR_KEY": OPERATOR,
                "TURNOUT_METRICS_PORT": "0",
                "TURNOUT_SECRET_KEY": Fernet.generate_key().decode(),
            },
            acme_admin=ACME_ADMIN,
            acme_temp=ACME_TEMP,
            acme_runner=ACME_RUNNER,
            acme_bot=ACME_BOT,
            beta_admin=BETA_ADMIN,
        )
    finally:
        fleet.stop_all()


OPENED: list[httpx.Client] = []


@pytest.fixture(autouse=True)
def close_sessions() -> Iterator[None]:
    yield
    while OPENED:
        OPENED.pop().close()


class Session:
    """A logged-in dashboard session (httpx, the cookie kept), posting forms as a browser would."""

    def __init__(self, gw: Gateway, key: str) -> None:
        self.base = gw.base_url
        self.client = httpx.Client(base_url=gw.base_url, follow_redirects=False, timeout=15)
        OPENED.append(self.client)
        login = self.client.post("/ui/login", content=urlencode({"key": key}), headers=FORM)
        assert login.status_code == 303, login.text

    def form(self, path: str) -> dict[str, str]:
        """The fields of the settings form at `path` (inputs, selected options, textareas)."""
        text = self.client.get(path).text
        fields = {
            m[1]: html.unescape(m[2])
            for m in re.finditer(r'<input type="\w+" name="([^"]+)"[^>]*value="([^"]*)"', text)
        }
        fields.update(
            {m[1]: html.unescape(m[2]) for m in re.finditer(r'<textarea name="([^"]+)"[^>]*>([^<]*)</textarea>', text)}
        )
        for m in re.finditer(r'<select name="([^"]+)".*?</select>', text, re.DOTALL):
            chosen = re.search(r'<option value="([^"]*)"\s+selected>', m[0])
            fields[m[1]] = chosen[1] if chosen else ""
        return fields

    def post(self, path: str, fields: dict[str, str]) -> httpx.Response:
        return self.client.post(path, content=urlencode(fields), headers={**FORM, "origin": self.base})


def hidden(page: str) -> dict[str, str]:
    """The review page's confirm form fields."""
    return {
        m[1]: html.unescape(m[2]) for m in re.finditer(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)
    }


KEY_PAGE = "/ui/settings/acme/keys/bot"


def test_a_keys_fallbacks_edited_in_the_dashboard_are_what_the_admin_api_and_routing_see(gw: Gateway) -> None:
    before = chat(gw.base_url, ACME_BOT, "down")
    assert before.status_code == 502, before.text
    ui = Session(gw, ACME_ADMIN)
    fields = ui.form(KEY_PAGE)
    assert fields["fallbacks"] == "" and fields["csrf"]
    review = ui.post(KEY_PAGE, {**fields, "fallbacks": "down: small"})
    assert review.status_code == 200, review.text
    assert 'data-path="fallbacks"' in review.text and "down: small" in review.text
    saved = ui.post(KEY_PAGE, hidden(review.text))
    assert (saved.status_code, saved.headers["location"]) == (303, f"{KEY_PAGE}?saved=fallbacks")
    assert "Saved: fallbacks." in ui.client.get(saved.headers["location"]).text
    admin = Admin(gw.base_url, ACME_ADMIN)
    assert admin.call("GET", "/orgs/acme/keys/bot/settings").json()["settings"]["fallbacks"] == {"down": ["small"]}
    after = chat(gw.base_url, ACME_BOT, "down")
    assert after.status_code == 200, after.text
    assert after.headers["x-turnout-provider"] == "sim-b"
    assert ui.form(KEY_PAGE)["fallbacks"] == "down: small"
    assert (
        '<small class="force" data-field="fallbacks">in force: down: small · key</small>'
        in ui.client.get(KEY_PAGE).text
    )
    audit = Admin(gw.base_url, OPERATOR).call("GET", "/audit/export").text.splitlines()
    assert any(
        '"who":"key acme/admin"' in e
        and '"method":"PATCH"' in e
        and '"path":"/admin/v1/orgs/acme/keys/bot/settings"' in e
        and '"fields":["fallbacks"]' in e
        and '"status":200' in e
        for e in audit
    ), audit[-3:]


@pytest.mark.parametrize("token", [None, "0" * 64, "other-session"])
def test_a_post_without_the_sessions_csrf_token_is_refused_and_changes_nothing(gw: Gateway, token: str | None) -> None:
    ui = Session(gw, ACME_ADMIN)
    fields = {**ui.form(KEY_PAGE), "limits.rpm": "7"}
    if token is None:
        del fields["csrf"]
    elif token == "other-session":
        fields["csrf"] = Session(gw, ACME_ADMIN).form(KEY_PAGE)["csrf"]
    else:
        fields["csrf"] = token
    for step in ("review", "confirm"):
        refused = ui.post(KEY_PAGE, {**fields, "step": step, "patch": '{"limits":{"rpm":7}}', "expect": "{}"})
        assert refused.status_code == 403, refused.text
        assert "CSRF token is missing or wrong" in refused.text
    settings = Admin(gw.base_url, ACME_ADMIN).call("GET", "/orgs/acme/keys/bot/settings").json()["settings"]
    assert "limits" not in settings


def test_a_change_above_an_operator_ceiling_is_refused_naming_the_ceiling(gw: Gateway) -> None:
    ui = Session(gw, ACME_ADMIN)
    squad = "/ui/settings/acme/squads/research"
    fields = ui.form(squad)
    assert fields["budget.usd"] == "250" and fields["budget.period"] == "month"
    refused = ui.post(squad, {**fields, "budget.usd": "500"})
    assert refused.status_code == 403, refused.text
    api = Admin(gw.base_url, ACME_ADMIN).call(
        "PATCH", "/orgs/acme/squads/research/settings", {"budget": {"usd": 500, "period": "month"}}
    )
    assert api.status_code == 403
    message = api.json()["error"]["message"]
    assert "the operator's ceiling at squad research is $250 per month" in message
    shown = re.search(r'id="error-budget">([^<]*)<', refused.text)
    assert shown is not None and html.unescape(shown[1]) == message  # the admin API's words, by the field
    org = ui.post("/ui/settings/acme", {**ui.form("/ui/settings/acme"), "limits.rpm": "900"})
    assert org.status_code == 403 and "ceiling at the org is 600" in org.text
    assert 'id="error-limits.rpm"' in org.text
    below = ui.post("/ui/settings/acme", {**ui.form("/ui/settings/acme"), "limits.rpm": "300"})
    assert below.status_code == 200 and 'data-path="limits.rpm"' in below.text


def test_a_bad_value_is_refused_next_to_its_field_in_the_admin_apis_words(gw: Gateway) -> None:
    ui = Session(gw, ACME_ADMIN)
    fields = ui.form(KEY_PAGE)
    refused = ui.post(KEY_PAGE, {**fields, "policy.retry.max_retries": "-1"})
    assert refused.status_code == 400
    api = Admin(gw.base_url, ACME_ADMIN).call(
        "PATCH", "/orgs/acme/keys/bot/settings", {"policy": {"retry": {"max_retries": -1}}}
    )
    message = api.json()["error"]["message"]
    shown = re.search(r'id="error-policy.retry.max_retries">([^<]*)<', refused.text)
    assert shown is not None and html.unescape(shown[1]) == message


def test_an_org_admin_cannot_open_another_orgs_settings(gw: Gateway) -> None:
    ui = Session(gw, BETA_ADMIN)
    assert ui.client.get("/ui/settings").headers["location"] == "/ui/settings/beta"
    assert ui.client.get(KEY_PAGE).status_code == 404
    fields = {**ui.form("/ui/settings/beta"), "limits.rpm": "5"}
    assert ui.post("/ui/settings/acme", fields).status_code == 404


def test_the_review_is_refused_when_the_settings_changed_meanwhile(gw: Gateway) -> None:
    ui = Session(gw, OPERATOR)
    page = "/ui/settings/beta/keys/admin"
    review = ui.post(page, {**ui.form(page), "reroutes": "small"})
    assert review.status_code == 200
    Admin(gw.base_url, OPERATOR).call("PATCH", "/orgs/beta/keys/admin/settings", {"key_mode": "shared_only"})
    stale = ui.post(page, hidden(review.text))
    assert stale.status_code == 409 and "changed since they were read" in stale.text
    assert (
        "reroutes" not in Admin(gw.base_url, OPERATOR).call("GET", "/orgs/beta/keys/admin/settings").json()["settings"]
    )


# --- keys and provider keys -----------------------------------------------------------------------


def audited(gw: Gateway, method: str, path: str, status: int) -> bool:
    """True when the audit log has an entry by acme's admin key of `method` `path` answered `status`."""
    audit = Admin(gw.base_url, OPERATOR).call("GET", "/audit/export").text.splitlines()
    return any(
        '"who":"key acme/admin"' in e
        and f'"method":"{method}"' in e
        and f'"path":"{path}"' in e
        and f'"status":{status}' in e
        for e in audit
    )


def test_a_key_revoked_in_the_dashboard_gets_401_on_its_next_request(gw: Gateway) -> None:
    assert chat(gw.base_url, ACME_TEMP, "small").status_code == 200
    ui = Session(gw, ACME_ADMIN)
    page = "/ui/settings/acme/keys/temp"
    csrf = ui.form(page)["csrf"]
    confirm = ui.post(f"{page}/revoke", {"csrf": csrf})
    assert confirm.status_code == 200 and "Revoke key temp of acme" in confirm.text
    assert chat(gw.base_url, ACME_TEMP, "small").status_code == 200  # the confirm page revokes nothing
    done = ui.post(f"{page}/revoke", hidden(confirm.text))
    assert (done.status_code, done.headers["location"]) == (303, f"{page}?saved=revoked")
    revoked_page = ui.client.get(page).text
    assert 'id="key-revoked"' in revoked_page and "key temp (revoked)" in revoked_page
    assert 'id="access-form"' not in revoked_page and 'id="revoke-form"' not in revoked_page  # nothing left to edit
    assert chat(gw.base_url, ACME_TEMP, "small").status_code == 401
    assert Admin(gw.base_url, ACME_ADMIN).call("GET", "/orgs/acme/keys/temp").json()["key"]["status"] == "revoked"
    assert audited(gw, "POST", "/admin/v1/orgs/acme/keys/temp/revoke", 200)


def test_a_keys_squad_admin_flag_and_expiry_changed_in_the_dashboard_are_what_the_admin_api_reads(
    gw: Gateway,
) -> None:
    ui = Session(gw, ACME_ADMIN)
    page = "/ui/settings/acme/keys/runner"
    fields = ui.form(page)
    assert (fields["squad"], fields["admin"], fields["expires_at"]) == ("", "false", "")
    access = {"csrf": fields["csrf"], "squad": "ops", "admin": "false", "expires_at": "2099-01-01T00:00:00Z"}
    saved = ui.post(f"{page}/access", access)
    assert (saved.status_code, saved.headers["location"]) == (303, f"{page}?saved=expires_at,squad")
    key = Admin(gw.base_url, ACME_ADMIN).call("GET", "/orgs/acme/keys/runner").json()["key"]
    assert (key["squad"], key["admin"], key["expires_at"]) == ("ops", False, "2099-01-01T00:00:00Z")
    assert ui.form(page)["squad"] == "ops"
    assert audited(gw, "PATCH", "/admin/v1/orgs/acme/keys/runner", 200)
    past = ui.post(f"{page}/access", {**access, "expires_at": "2001-01-01T00:00:00Z"})
    api = Admin(gw.base_url, ACME_ADMIN).call("PATCH", "/orgs/acme/keys/runner", {"expires_at": "2001-01-01T00:00:00Z"})
    assert past.status_code == api.status_code == 400
    said = re.search(r'id="access-error">([^<]*)<', past.text)
    assert said is not None and html.unescape(said[1]) == api.json()["error"]["message"]
    assert 'value="2001-01-01T00:00:00Z"' in past.text  # the refused form keeps what was typed
    limited = Admin(gw.base_url, ACME_ADMIN).call("PATCH", "/orgs/acme/keys/runner/settings", {"limits": {"rpm": 50}})
    assert limited.status_code == 200
    again = ui.post(f"{page}/access", {**access, "expires_at": "2001-01-01T00:00:00Z"})
    assert again.status_code == 400
    assert re.search(r'name="limits\.rpm"[^>]*value="50"', again.text)  # the settings form below: as saved


def test_an_org_admin_cannot_move_a_key_out_of_a_capped_squad_in_the_dashboard(gw: Gateway) -> None:
    ui = Session(gw, ACME_ADMIN)
    fields = ui.form(KEY_PAGE)
    assert fields["squad"] == "research"
    refused = ui.post(f"{KEY_PAGE}/access", {"csrf": fields["csrf"], "squad": "", "admin": "false", "expires_at": ""})
    assert refused.status_code == 403, refused.text
    shown = re.search(r'id="access-error">([^<]*)<', refused.text)
    assert shown is not None
    assert "bound by the operator's ceiling at squad research" in html.unescape(shown[1])
    assert Admin(gw.base_url, ACME_ADMIN).call("GET", "/orgs/acme/keys/bot").json()["key"]["squad"] == "research"
    assert audited(gw, "PATCH", "/admin/v1/orgs/acme/keys/bot", 403)


def test_a_provider_key_set_in_the_dashboard_shows_only_its_masked_tail_anywhere(gw: Gateway) -> None:
    ui = Session(gw, ACME_ADMIN)
    org = "/ui/settings/acme"
    fields = ui.form(org)
    assert fields["api_key"] == ""
    saved = ui.post(f"{org}/provider-keys", {"csrf": fields["csrf"], "provider": "sim-a", "api_key": BYOK_SECRET})
    assert saved.status_code == 303 and BYOK_SECRET not in saved.headers["location"]
    listed = Admin(gw.base_url, ACME_ADMIN).call("GET", "/orgs/acme/provider-keys").json()["provider_keys"]
    assert [p["provider"] for p in listed] == ["sim-a"]
    text = ui.client.get(org).text
    assert f'<td class="masked">{html.escape(listed[0]["api_key"])}</td>' in text
    confirm = ui.post(f"{org}/provider-keys/sim-a/remove", {"csrf": fields["csrf"]})
    assert confirm.status_code == 200
    pages = [saved.text, text, confirm.text, ui.client.get(KEY_PAGE).text, ui.client.get("/ui/activity").text]
    assert not any(BYOK_SECRET in p or BYOK_SECRET[-8:] in p for p in pages)
    assert not any(BYOK_SECRET in proc.log() for proc in gw.fleet.procs)
    assert audited(gw, "PUT", "/admin/v1/orgs/acme/provider-keys/sim-a", 200)
    removed = ui.post(f"{org}/provider-keys/sim-a/remove", hidden(confirm.text))
    assert removed.status_code == 303
    assert Admin(gw.base_url, ACME_ADMIN).call("GET", "/orgs/acme/provider-keys").json()["provider_keys"] == []
    assert audited(gw, "DELETE", "/admin/v1/orgs/acme/provider-keys/sim-a", 200)


def test_a_key_created_in_the_dashboard_shows_its_secret_once_and_works(gw: Gateway) -> None:
    ui = Session(gw, ACME_ADMIN)
    org = "/ui/settings/acme"
    fields = {"csrf": ui.form(org)["csrf"], "name": "ci", "squad": "ops", "admin": "false", "expires_at": ""}
    created = ui.post(f"{org}/keys", fields)
    assert created.status_code == 200, created.text
    assert created.headers["cache-control"] == "no-store"
    shown = re.search(r'<code id="new-secret">([^<]+)</code>', created.text)
    assert shown is not None
    secret = html.unescape(shown[1])
    assert chat(gw.base_url, secret, "small").status_code == 200
    key = Admin(gw.base_url, ACME_ADMIN).call("GET", "/orgs/acme/keys/ci").json()["key"]
    assert (key["squad"], key["admin"], key["status"]) == ("ops", False, "active")
    later = [ui.client.get(p).text for p in (org, f"{org}/keys/ci", "/ui/activity", "/ui/settings")]
    assert not any(secret in p for p in later)
    assert not any(secret in proc.log() for proc in gw.fleet.procs)
    assert audited(gw, "POST", "/admin/v1/orgs/acme/keys", 201)
    again = ui.post(f"{org}/keys", fields)  # a re-sent form creates nothing, says why
    api = Admin(gw.base_url, ACME_ADMIN).call("POST", "/orgs/acme/keys", {"name": "ci", "admin": False})
    assert again.status_code == api.status_code >= 400
    said = re.search(r'id="create-error">([^<]*)<', again.text)
    assert said is not None and html.unescape(said[1]) == api.json()["error"]["message"]


@pytest.mark.parametrize("action", ["keys", "keys/runner/access", "keys/runner/revoke", "provider-keys"])
def test_a_key_or_provider_key_post_without_the_csrf_token_is_refused_and_changes_nothing(
    gw: Gateway, action: str
) -> None:
    ui = Session(gw, ACME_ADMIN)
    fields = {"squad": "", "step": "confirm", "provider": "sim-b", "api_key": BYOK_SECRET}
    refused = ui.post(f"/ui/settings/acme/{action}", fields)
    assert refused.status_code == 403 and "CSRF token is missing or wrong" in refused.text
    admin = Admin(gw.base_url, ACME_ADMIN)
    assert admin.call("GET", "/orgs/acme/keys/runner").json()["key"]["status"] == "active"
    assert all(p["provider"] != "sim-b" for p in admin.call("GET", "/orgs/acme/provider-keys").json()["provider_keys"])


# --- a headless Chromium -------------------------------------------------------------------------


@pytest.fixture
def driver() -> Iterator[Any]:
    if not browser_available():
        if os.environ.get("CI") == "true":
            pytest.fail("chromium and chromium-driver are required in CI", pytrace=False)
        pytest.skip("no /usr/bin/chromium and /usr/bin/chromedriver")
    d = browser()
    try:
        yield d
    finally:
        d.quit()


def test_in_a_browser_an_admin_edits_a_setting_sees_the_diff_confirms_and_sees_the_new_value(
    gw: Gateway, driver: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def until(check: Any, what: str) -> Any:
        return WebDriverWait(driver, 15, poll_frequency=0.05).until(lambda d: check(d), message=what)

    log_in(driver, gw.base_url, ACME_ADMIN)
    until(lambda d: d.current_url.endswith("/ui/activity"), "logged in")
    driver.find_element(By.ID, "nav-settings").click()
    until(lambda d: d.current_url.endswith("/ui/settings/acme"), "the org's settings")
    driver.find_element(By.LINK_TEXT, "key bot").click()
    field = until(lambda d: d.find_elements(By.NAME, "policy.retry.max_retries"), "the key's form")[0]
    field.clear()
    field.send_keys("2")
    driver.find_element(By.ID, "review").click()
    row = until(lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-path="policy.retry.max_retries"]'), "the diff")[0]
    assert [c.text for c in row.find_elements(By.TAG_NAME, "td")] == ["policy.retry.max_retries", "inherit", "2"]
    driver.find_element(By.ID, "confirm").click()
    until(lambda d: d.find_elements(By.ID, "saved"), "saved")
    assert "policy" in driver.find_element(By.ID, "saved").text
    assert driver.find_element(By.NAME, "policy.retry.max_retries").get_attribute("value") == "2"
    wait_for(
        lambda: (
            Admin(gw.base_url, ACME_ADMIN)
            .call("GET", "/orgs/acme/keys/bot/effective")
            .json()["policy"]["retry"]["max_retries"]
            == 2
        ),
        5,
        "the key's policy in force",
    )


def test_the_operators_limits_become_the_scopes_ceiling_and_the_review_says_so(gw: Gateway) -> None:
    ui = Session(gw, OPERATOR)
    assert 'href="/ui/settings/acme"' in ui.client.get("/ui/settings").text
    page = "/ui/settings/beta/keys/admin"
    review = ui.post(page, {**ui.form(page), "limits.rpm": "50", "policy.retry.max_retries": "99"})
    assert review.status_code == 200, review.text
    assert 'data-path="limits.rpm"' in review.text and 'data-path="operator ceiling (keys.admin)"' in review.text
    assert "policy.retry.max_retries: 99 → 6" in review.text  # clamped to `ceilings.max_retries`, as the admin API does
    assert ui.post(page, hidden(review.text)).status_code == 303
    org_admin = Session(gw, BETA_ADMIN)
    above = org_admin.post(page, {**org_admin.form(page), "limits.rpm": "51"})
    assert above.status_code == 403 and "ceiling at key admin is 50" in above.text
