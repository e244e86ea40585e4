"""Dashboard sessions against a real fleet (#40 item 7): the cookie is a server-side session that logout
and key revocation end, failed logins are throttled per client and per key (429 with Retry-After), and
logins are audited."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from support.gateway import Gateway
from support.tenancy import ACME_ADMIN, ACME_USER, OPERATOR, Admin, tenancy_fleet, wait_for

pytestmark = pytest.mark.integration

FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with tenancy_fleet() as gateway:
        yield gateway


def log_in(gw: Gateway, key: str, client: httpx.Client | None = None) -> httpx.Response:
    """One form login (`client`: from another local address)."""
    post = client.post if client is not None else httpx.post
    return post(f"{gw.base_url}/ui/login", content=f"key={key}", headers=FORM)


def page(gw: Gateway, cookie: str) -> httpx.Response:
    """Activity with the cookie `turnout_ui=<cookie>` (set by hand, as a copied cookie would be)."""
    return httpx.get(f"{gw.base_url}/ui/activity", headers={"cookie": f"turnout_ui={cookie}"})


def test_logout_ends_the_session_server_side_and_the_old_cookie_leads_to_the_login_page(gw: Gateway) -> None:
    login = log_in(gw, ACME_ADMIN)
    assert login.status_code == 303, login.text
    cookie = login.cookies["turnout_ui"]
    assert ACME_ADMIN not in cookie and ACME_ADMIN[:11] not in cookie and len(cookie) >= 43
    assert page(gw, cookie).status_code == 200
    out = httpx.post(f"{gw.base_url}/ui/logout", headers={"cookie": f"turnout_ui={cookie}"})
    assert (out.status_code, out.headers["location"]) == (303, "/ui/login")
    again = page(gw, cookie)
    assert (again.status_code, again.headers["location"]) == (303, "/ui/login")
    assert page(gw, ACME_ADMIN).status_code == 303  # the key itself is no cookie


def test_revoking_the_key_ends_its_sessions(gw: Gateway) -> None:
    operator = Admin(gw.base_url, OPERATOR)
    secret = operator.call("POST", "/orgs/acme/keys", {"name": "dash", "admin": True}).json()["secret"]
    wait_for(lambda: log_in(gw, secret).status_code == 303, 5, "the new key logs in")
    cookie = log_in(gw, secret).cookies["turnout_ui"]
    assert page(gw, cookie).status_code == 200
    assert operator.call("POST", "/orgs/acme/keys/dash/revoke").status_code == 200
    wait_for(lambda: page(gw, cookie).status_code == 303, 5, "the revoked key's session ends")


def test_logins_and_failed_logins_are_audited(gw: Gateway) -> None:
    assert log_in(gw, ACME_ADMIN).status_code == 303
    assert log_in(gw, ACME_USER).status_code == 401  # a known key, not an admin's
    assert log_in(gw, "tk-never-issued-0000000000").status_code == 401  # unknown: sampled like any such write
    operator = Admin(gw.base_url, OPERATOR)
    lines = operator.call("GET", "/audit/export").text.splitlines()
    samples = operator.call("GET", "/audit/export", params={"samples": "true"}).text.splitlines()
    logins = [line for line in lines if '"/ui/login"' in line]
    assert any('"who":"key acme/admin"' in e and '"org":"acme"' in e and '"status":303' in e for e in logins)
    assert any('"who":"key acme/user"' in e and '"status":401' in e for e in logins)
    assert any('"/ui/login"' in e and '"who":"unauthenticated"' in e and '"status":401' in e for e in samples)
    assert not any("tk-never-issued" in line or ACME_ADMIN in line or ACME_USER in line for line in lines + samples)


def from_address(gw: Gateway, key: str, address: str) -> int:
    """The status of one login with `key` from the local `address` (another client)."""
    with httpx.Client(transport=httpx.HTTPTransport(local_address=address)) as client:
        return log_in(gw, key, client).status_code


def test_100_wrong_logins_are_throttled_per_client_and_per_key(gw: Gateway) -> None:
    answers = [log_in(gw, f"tk-guess-{i:020d}") for i in range(100)]  # one client, 100 keys
    statuses = [a.status_code for a in answers]
    first = statuses.index(429)  # at most 10 failures per client per window (one came from the test above)
    assert 0 < first <= 10 and statuses[:first] == [401] * first and statuses[first:] == [429] * (100 - first)
    assert all(0 < int(a.headers["retry-after"]) <= 300 for a in answers[first:])
    assert log_in(gw, ACME_ADMIN).status_code == 429  # this client waits, even with a good key
    sprayed = [from_address(gw, "tk-sprayed-0000000000000", f"127.0.0.{i}") for i in range(2, 14)]  # 12 clients, 1 key
    assert sprayed == [401] * 10 + [429] * 2
    assert from_address(gw, ACME_ADMIN, "127.0.0.14") == 303  # another client with another key is not throttled
