"""The audit log keeps authenticated entries by time, never by count; unauthenticated writes are sampled apart."""

from __future__ import annotations

from redis.asyncio import Redis

from turnout.state import keys
from turnout.state.audit_log import AuditEntry, AuditLog, RefusalSampler
from turnout_ingress.admin.audit import entry_org

ENTRY = AuditEntry(who="operator", org="acme", method="PATCH", path="/admin/v1/orgs/acme/settings", status=200)
REFUSED = AuditEntry(who="unauthenticated", org=None, method="POST", path="/admin/v1/orgs", status=401)


def test_the_sampler_takes_the_first_write_of_each_interval_and_says_how_many_it_stands_for() -> None:
    now = [100.0]
    sampler = RefusalSampler(interval_s=1.0, clock=lambda: now[0])
    taken = [sampler.take() for _ in range(5)]
    assert taken == [1, 0, 0, 0, 0]
    now[0] += 1.0
    assert sampler.take() == 5  # the four skipped and this one


async def test_entries_are_not_evicted_by_count_and_samples_go_to_their_own_capped_stream(redis_client: Redis) -> None:
    audit = AuditLog(redis_client, refused_max=10)
    for _ in range(300):
        await audit.append(ENTRY)
    for _ in range(1_000):
        await audit.append_sample(REFUSED, 7)
    assert await redis_client.xlen(keys.AUDIT_STREAM) == 300
    assert await redis_client.xlen(keys.AUDIT_REFUSED_STREAM) < 300  # capped (approximately) at 10
    samples = [e async for e in audit.read(samples=True)]
    assert samples[-1]["count"] == 7 and samples[-1]["who"] == "unauthenticated"
    assert all(e["who"] == "operator" for e in [e async for e in audit.read()])


async def test_entries_older_than_the_retention_are_trimmed(redis_client: Redis) -> None:
    await AuditLog(redis_client).append(ENTRY)
    await AuditLog(redis_client).append(ENTRY)
    first = (await redis_client.xrange(keys.AUDIT_STREAM))[0][0]
    later = AuditLog(redis_client, retention_s=90 * 86400.0, clock=lambda: 4_000_000_000.0)  # 2096: all older
    await later.append(ENTRY)
    left = [entry_id for entry_id, _ in await redis_client.xrange(keys.AUDIT_STREAM)]
    assert first not in left and len(left) <= 1


def test_an_entrys_org_is_the_callers_never_the_path_of_a_refused_request() -> None:
    path = "/admin/v1/orgs/victim/keys"
    assert entry_org("key beta/admin", {"org": "beta"}, path, 404) == "beta"
    assert entry_org("unauthenticated", {}, path, 401) is None
    assert entry_org("operator", {}, path, 201) == "victim"
    assert entry_org("operator", {}, "/admin/v1/orgs/made-up/keys", 404) is None
    assert entry_org("operator", {"audit_org": "new"}, "/admin/v1/orgs", 201) == "new"
