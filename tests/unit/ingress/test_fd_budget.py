"""`gateway.max_connections` against `RLIMIT_NOFILE` at start (#40 item 8): raise, lower saying so, or refuse."""

from __future__ import annotations

import resource
import subprocess
import sys

from turnout.errors import ConfigError
from turnout.rules import provider_rules
from turnout_ingress.guard.fd_budget import MIN_CONNECTIONS, Fit, fit


def test_a_cap_that_fits_is_kept() -> None:
    assert fit(1000, soft=4096, hard=4096, reserve=512) == Fit(soft=4096, max_connections=1000)


def test_the_soft_limit_is_raised_toward_the_hard_one_first() -> None:
    assert fit(10_000, soft=1024, hard=1_048_576, reserve=512) == Fit(soft=10_512, max_connections=10_000)
    assert fit(10_000, soft=1024, hard=resource.RLIM_INFINITY, reserve=512) == Fit(soft=10_512, max_connections=10_000)


def test_the_default_10000_under_ulimit_1024_is_lowered_and_said() -> None:
    found = fit(10_000, soft=1024, hard=1024, reserve=512)
    assert found is not None and found.max_connections == 512 and found.soft == 1024
    assert found.note is not None and "max_connections 512" in found.note and "ulimit -n 10512" in found.note


def test_too_few_descriptors_refuse_the_start() -> None:
    assert fit(10_000, soft=256, hard=512 + MIN_CONNECTIONS - 1, reserve=512) is None


def test_an_operator_base_url_with_a_credential_in_its_query_is_refused_naming_the_path_not_the_value() -> None:
    try:
        provider_rules.check_base_url("providers.g.base_url", "https://g.example/v1?alt=sse&key=AIzaSECRET123")
    except ConfigError as exc:
        assert "providers.g.base_url" in str(exc) and "`key`" in str(exc) and "AIzaSECRET123" not in str(exc)
    else:
        raise AssertionError("a ?key= base URL was accepted")
    provider_rules.check_base_url("providers.g.base_url", "https://g.example/v1?alt=sse")


def test_a_process_under_ulimit_1024_lowers_the_default_cap_and_says_so() -> None:
    """In a real child process whose `RLIMIT_NOFILE` is 1024 (soft and hard), as `ulimit -n 1024` leaves it."""
    code = (
        "import logging, resource; logging.basicConfig(level=logging.WARNING);"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024));"
        "from turnout_ingress.guard import fd_budget; print(fd_budget.apply(10_000))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "512"
    assert "serving with max_connections 512" in done.stderr and "ulimit -n 10512" in done.stderr
