"""A broken stream's continuation goes through the one attempt path (`Router.continue_stream`):
the core's loop over the candidates, each attempt admitted, numbered on and recorded like any
other; any failure passes to the next candidate at once, with no budget, backoff or retry."""

from __future__ import annotations

import random
from typing import Any

import httpx

from support.clocks import FakeClock
from support.two_providers import CHAIN, TWO_PROVIDERS, completion
from turnout.adapters.exchange import call_json
from turnout.catalog import Catalog
from turnout.config import parse_config
from turnout.core.breaker import BreakerSnapshot
from turnout.core.loop import AttemptRecord, Dispatch
from turnout.core.plan import Role, RoutingSettings
from turnout.core.policy import BudgetPolicy, Policy
from turnout.core.types import FailureKind
from turnout.router import NullObserver, RequestInfo, Router
from turnout.state.breaker_store import MemoryBreakerStore

PREFILL = {
    "model": "chain",
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "tok0"}],
}


class _Seen(NullObserver):
    def __init__(self) -> None:
        self.started: list[Dispatch] = []
        self.ended: list[AttemptRecord] = []

    def attempt_started(self, info: RequestInfo, dispatch: Dispatch) -> object:
        self.started.append(dispatch)
        return None

    def attempt_ended(self, handle: object, info: RequestInfo, record: AttemptRecord, usage: Any) -> None:
        self.ended.append(record)


def _router(statuses: dict[str, int], hosts: list[str], clock: FakeClock) -> tuple[Router, _Seen]:
    catalog = Catalog(parse_config(TWO_PROVIDERS + CHAIN, env={}))

    def answer(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        status = statuses.get(request.url.host, 200)
        if status == 200:
            return completion("m")
        return httpx.Response(status, json={"error": {"message": "prefill rejected", "type": "invalid_request_error"}})

    seen = _Seen()
    router = Router(
        catalog=catalog,
        http=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
        observer=seen,
        clock=clock,
        sleep=clock.sleep,
        rng=random.Random(3),
        breakers=clock.breakers(catalog),
    )
    return router, seen


async def _continue(router: Router, policy: Policy = Policy()) -> tuple[Any, int]:
    plan, view = await router.plan("chain", RoutingSettings(), policy)
    targets = [e.target for e in plan.entries]
    return await router.continue_stream(
        PREFILL,
        plan=plan,
        targets=targets,
        first_number=3,
        info=RequestInfo(request_id="r", streaming=True),
        view=view,
        policy=policy,
        upstream=call_json,
    )


async def test_a_target_rejecting_the_prefill_passes_to_the_next_numbered_on() -> None:
    hosts: list[str] = []
    router, seen = _router({"pa.test": 400}, hosts, FakeClock(10.0))
    result, attempts = await _continue(router)
    assert hosts == ["pa.test", "pb.test"]
    assert attempts == 2 and result is not None and result.body is not None
    assert [(r.number, r.target.provider, r.kind) for r in result.records] == [
        (3, "pa", FailureKind.CLIENT_ERROR),
        (4, "pb", FailureKind.SUCCESS),
    ]
    assert all(d.delay_reason == "stream_continuation" and d.entry.role is Role.PROVIDER_FALLBACK for d in seen.started)
    assert all(not d.is_retry and d.delay_before_s == 0.0 for d in seen.started)
    assert [r.considered for r in result.records] == [(), ()]
    assert [r.number for r in seen.ended] == [3, 4]


async def test_failing_everywhere_gives_no_result_and_counts_every_attempt() -> None:
    hosts: list[str] = []
    router, _ = _router({"pa.test": 503, "pb.test": 400}, hosts, FakeClock(10.0))
    result, attempts = await _continue(router)
    assert (result, attempts) == (None, 2)
    assert hosts == ["pa.test", "pb.test"]  # a retryable failure is not retried: the next target at once


async def test_the_attempt_budget_does_not_bound_a_continuation() -> None:
    hosts: list[str] = []
    router, _ = _router({"pa.test": 503}, hosts, FakeClock(10.0))
    result, attempts = await _continue(router, Policy(budget=BudgetPolicy(max_attempts=1)))
    assert hosts == ["pa.test", "pb.test"] and attempts == 2 and result is not None


async def test_an_open_breaker_is_passed_over_without_an_attempt() -> None:
    hosts: list[str] = []
    clock = FakeClock(1000.0)
    router, _ = _router({}, hosts, clock)
    store = router._breakers.store
    assert isinstance(store, MemoryBreakerStore)
    tripped = BreakerSnapshot(open=True, trips=1, opened_at_s=1000.0, cooldown_s=60.0, trip_rule="run")
    assert await store.compare_and_set("pa/m-a", 0, tripped) is None
    result, attempts = await _continue(router)
    assert hosts == ["pb.test"] and attempts == 1
    assert result is not None and [(r.number, r.target.provider) for r in result.records] == [(3, "pb")]
