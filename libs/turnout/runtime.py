"""The one composition root: what every ingress and worker process builds, built in one place.

Owns: `build_runtime(config, redis, settings, role=...)`, which builds the
catalog in force (`turnout.catalog.live.LiveCatalog`, kept in step with
Redis by its watch), the tenant directory (vault, egress policy, scrubber),
the observation (telemetry, Prometheus metrics, attempt records, spend
ledger, the router's observers), the fleet's breakers
(`turnout.health.Breakers` over Redis, with every metrics hook), the clock-skew
check against Redis's clock, the upstream HTTP clients and the router — the
same way for both roles, so the ingress and the workers cannot drift apart;
and `require_persistence`, the start-up AOF check both roles run before
serving. What differs by role is a table (`ROLES`): the service name of the
traces and the size of the connection pools. Each service adds only its
own parts (the ingress's queue, fleet view and limiter, the worker's pickup,
heartbeat and side port).
Must not import: services, FastAPI.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Literal

import httpx
import msgspec

from turnout.adapters.guarded import make_guarded_client
from turnout.adapters.transport import make_http_client
from turnout.catalog import Catalog, CatalogSource
from turnout.catalog.key_check import SealedKeysRefused
from turnout.catalog.live import LiveCatalog
from turnout.catalog.watch import CatalogWatch
from turnout.config import Config
from turnout.health import BreakerHooks, Breakers
from turnout.observability.breaker_log import BreakerLog
from turnout.observability.jsonlog import scrub_logs
from turnout.observability.metrics import Metrics
from turnout.observability.observers import Observers, SpendObserver, route_observers
from turnout.observability.records import RecordsObserver, RecordWriter
from turnout.observability.tracing import Telemetry, setup_tracing
from turnout.router import Router
from turnout.settings import Settings
from turnout.state.breaker_store import RedisBreakerStore
from turnout.state.catalog_store import CatalogStore
from turnout.state.clock_check import ClockSkewCheck
from turnout.state.persistence import Decision, require_persistence_when_reachable
from turnout.state.persistence import require_persistence as check_persistence
from turnout.state.spend_store import SpendLedger
from turnout.tenancy.directory import TenantDirectory, directory_from_env

if TYPE_CHECKING:
    from redis.asyncio import Redis

Role = Literal["ingress", "worker"]

log = logging.getLogger("turnout.runtime")


class RoleShape(msgspec.Struct, frozen=True, kw_only=True):
    """What differs between the roles (everything else is built the same way).

    Attributes:
        service: the OpenTelemetry service name.
        upstream_connections: the shared upstream client's pool, from the configuration.
        custom_connections: the custom-endpoint client's pool, from the configuration.
        health_cache_s: seconds one health read serves the process's later requests
            (`turnout.health.reads.HealthReads`, `cache_s`); the role that keeps reads must
            listen on `keys.HEALTH_CHANNEL` and call `Breakers.reads.forget`.
        reruns: the role runs jobs that run again after their process died (queued jobs), so its
            attempts are kept open until they end (`RecordWriter`'s `open_attempts`); the
            ingress's own attempts (streams) are never re-run.
    """

    service: str
    upstream_connections: Callable[[Config], int]
    custom_connections: Callable[[Config], int]
    health_cache_s: float = 0.0
    reruns: bool = False


HEALTH_CACHE_S = 0.1
"""An ingress reads the health of a request's targets once per this many seconds (issue: Performance:
one read for every request of the moment, not one each); announced changes are seen at once."""

ROLES: dict[Role, RoleShape] = {
    "ingress": RoleShape(
        service="turnout-ingress",
        upstream_connections=lambda c: c.raw.gateway.ingress_max_streams + 100,  # the streams it serves itself
        custom_connections=lambda c: 200,
        health_cache_s=HEALTH_CACHE_S,
    ),
    "worker": RoleShape(
        service="turnout-worker",
        upstream_connections=lambda c: c.raw.gateway.worker_max_jobs + 100,
        custom_connections=lambda c: c.raw.gateway.worker_max_jobs + 100,
        reruns=True,
    ),
}


class Observation:
    """Telemetry, Prometheus metrics, attempt records, spend and the router's observers of one process.

    Args:
        config: the configuration (`gateway.records_max`: 0 turns records off).
        redis: the process's client (records stream, spend ledger).
        catalog: names the attempts' targets.
        service: the OpenTelemetry service name.
        env: the environment the exporters are configured from (`OTEL_*`).
        telemetry: tracer and meter providers to use instead of building them
            (the caller then shuts them down).
        scrub: the process's credential scrubber, applied to span text.
        reruns: the process's jobs may run again after it dies (`RoleShape.reruns`).
    """

    def __init__(
        self,
        config: Config,
        redis: Redis,
        catalog: CatalogSource,
        *,
        service: str,
        env: dict[str, str],
        telemetry: Telemetry | None = None,
        scrub: Callable[[str], str] | None = None,
        reruns: bool = True,
    ) -> None:
        self.telemetry = telemetry or setup_tracing(service, env, scrub=scrub)
        self._owns_telemetry = telemetry is None
        self.metrics = Metrics()
        records_max = config.raw.gateway.records_max
        self.records = (
            RecordWriter(redis, max_len=records_max, on_drop=self.metrics.records_dropped.inc, open_attempts=reruns)
            if records_max > 0
            else None
        )
        self.spend = SpendLedger(redis)
        self.observer: Observers = route_observers(
            self.telemetry.tracing,
            catalog,
            meter=self.telemetry.metering,
            metrics=self.metrics,
            records=RecordsObserver(self.records, catalog) if self.records is not None else None,
            spend=SpendObserver(self.spend, catalog, self.metrics),
        )

    def start(self) -> None:
        """Start the records and spend flushers (call on the serving loop)."""
        if self.records is not None:
            self.records.start()
        self.spend.start()

    async def stop(self) -> None:
        """Flush records and spend; flush and stop the exporters this object built."""
        if self.records is not None:
            await self.records.stop()
        await self.spend.stop()
        if self._owns_telemetry:
            self.telemetry.shutdown()


class Runtime:
    """The objects one process serves with (see `build_runtime`).

    Attributes:
        config, settings: what the process was started with.
        role: `ingress` or `worker`.
        catalogs: the catalog in force (providers, models, offers), swapped whole on change.
        catalog_watch: keeps `catalogs` in step with Redis (the bootstrap rule at start).
        directory: gateway keys, BYOK keys and custom endpoints (from Redis).
        clock_check: the clock-skew check against Redis's clock (a gauge, a warning).
        obs: telemetry, metrics, records, spend, the router's observers.
        rng: the process's RNG (breakers, router, Retry-After jitter).
        breakers: the fleet's breakers over Redis.
        http: the shared upstream client.
        custom_http: the SSRF-guarded client for tenant custom endpoints.
        router: the attempt loop's shell.
    """

    def __init__(
        self,
        *,
        config: Config,
        settings: Settings,
        role: Role,
        catalogs: LiveCatalog,
        catalog_watch: CatalogWatch,
        directory: TenantDirectory,
        obs: Observation,
        clock_check: ClockSkewCheck,
        rng: random.Random,
        breakers: Breakers,
        http: httpx.AsyncClient,
        custom_http: httpx.AsyncClient,
        router: Router,
    ) -> None:
        self.config = config
        self.settings = settings
        self.role = role
        self.catalogs = catalogs
        self.catalog_watch = catalog_watch
        self.directory = directory
        self.clock_check = clock_check
        self.obs = obs
        self.rng = rng
        self.breakers = breakers
        self.http = http
        self.custom_http = custom_http
        self.router = router

    @property
    def catalog(self) -> Catalog:
        """The catalog in force now (`turnout.catalog.live`); a request reads it once and keeps it."""
        return self.catalogs.current

    async def start(self, listen_redis: Redis, *, bootstrap: bool) -> None:
        """Start the flushers and the clock check, then the catalog's watch (the bootstrap
        rule) and the directory's watch (each waits for its first load).

        Args:
            listen_redis: a client without a socket read timeout (pub/sub).
            bootstrap: merge the configuration file's `orgs:` into Redis first.

        Raises:
            ConfigError: the file's orgs cannot be merged (path named).
            SealedKeysRefused: the catalog loaded at start seals provider keys and
                this process opens none of them (`turnout.catalog.key_check`; logged).
        """
        self.obs.start()
        self.clock_check.start()
        await self.catalog_watch.start(listen_redis)
        if (why := self.catalog_watch.start_refusal(f"turnout {self.role}")) is not None:
            log.error(why)
            raise SealedKeysRefused(why)
        await self.directory.start(listen_redis, bootstrap=bootstrap)

    async def stop(self) -> None:
        """Stop the clock check, write the breaker results still queued (at most 5 s), flush and stop
        observation, close the upstream clients, stop the watches."""
        await self.clock_check.stop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.breakers.results.drain(), 5.0)
        await self.obs.stop()
        await self.http.aclose()
        await self.directory.stop()
        await self.catalog_watch.stop()
        await self.custom_http.aclose()


def freeze_startup_heap() -> int:
    """Collect garbage, then move every object alive now out of the cyclic collector's reach
    (`gc.freeze`), and return how many objects that is.

    For a serving process, once started: its modules, classes, app and settings live as long
    as it does, yet every full collection walked them all, and a busy process runs full
    collections often (objects of requests in flight survive into the oldest generation).
    Measured at c=50 (bench/README.md, "Start-up objects frozen"): a full collection took
    about 37 ms in the ingress and 20 ms in the worker, 12–14 of them in 10 s; frozen, 2–4 ms.
    Objects made later are collected as before; a frozen object dropped later is still freed
    by its reference count, and only a frozen cycle that becomes garbage stays (start-up
    state is not replaced in cycles; a catalog or tenant reload builds new objects, which are
    not frozen). Called by the ingress's and the worker's process entry points only (not by
    `Runtime.start`), so a test that builds a runtime in its own process freezes nothing.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def redis_breakers(
    config: Config,
    redis: Redis,
    catalog: CatalogSource,
    *,
    metrics: Metrics,
    rng: random.Random,
    cache_s: float = 0.0,
) -> Breakers:
    """The fleet's breakers over Redis, as every process builds them (one place, so the
    ingress and the workers never drift apart): the configuration's thresholds, outage
    policy and speed averages, every metrics hook, the breaker timeline's log
    (`turnout.observability.breaker_log`), the catalog's sole offers; `cache_s`
    as in `turnout.health.reads.HealthReads`."""
    b, r = config.raw.breaker, config.raw.routing
    return Breakers.over(
        RedisBreakerStore(redis),
        b.settings(),
        on_store_error=b.on_store_error,
        hooks=BreakerHooks(
            on_transition=metrics.on_transition,
            on_alarm=metrics.on_alarm,
            on_trip=metrics.on_trip,
            on_step=BreakerLog(redis).step,
        ),
        sole_targets=catalog.current.sole_targets,
        speed_alpha=r.speed_alpha,
        speed_ttl_s=r.speed_ttl_s,
        rng=rng,
        cache_s=cache_s,
    )


def build_runtime(
    config: Config,
    redis: Redis,
    settings: Settings,
    *,
    role: Role,
    telemetry: Telemetry | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    paused: Callable[[], None] | None = None,
    rng: random.Random | None = None,
) -> Runtime:
    """Build what a process of `role` serves with, the same way for every role.

    Args:
        config: the validated configuration.
        redis: the process's client.
        settings: the process's settings (the environment the vault, the
            egress policy and the exporters read).
        role: `ingress` or `worker` (`ROLES`: service name, pool sizes).
        telemetry: providers to use instead of building them from `settings.env`.
        sleep: the router's wait between attempts (a worker's frees its slot).
        paused: the router's hook just before an upstream call or a wait
            (`Router`; a worker's gives back the job's start pass).
        rng: the process's RNG (default: a fresh `random.Random`).

    Raises:
        ValueError: a malformed `TURNOUT_SECRET_KEY` or `TURNOUT_SSRF_ALLOW`.
    """
    shape = ROLES[role]
    catalog = LiveCatalog(config)  # models and providers: Redis, swapped whole on change
    directory = directory_from_env(config, redis, settings.env)
    scrub_logs(directory.scrubber.credentials)
    obs = Observation(
        config,
        redis,
        catalog,
        service=shape.service,
        env=settings.env,
        telemetry=telemetry,
        scrub=directory.scrubber.credentials,
        reruns=shape.reruns,
    )
    rng = rng or random.Random()
    breakers = redis_breakers(config, redis, catalog, metrics=obs.metrics, rng=rng, cache_s=shape.health_cache_s)
    catalog_watch = attach_catalog(catalog, redis, config, directory=directory, breakers=breakers, env=settings.env)
    clock_check = ClockSkewCheck(redis, obs.metrics.clock_skew, service=shape.service)
    http = make_http_client(max_connections=shape.upstream_connections(config))
    custom_http = make_guarded_client(max_connections=shape.custom_connections(config), allow=directory.allow)
    router = Router(
        catalog=catalog,
        http=http,
        breakers=breakers,
        observer=obs.observer,
        rng=rng,
        credentials=directory,
        custom_http=custom_http,
        scrubber=directory.scrubber,
        sleep=sleep,
        paused=paused,
    )
    return Runtime(
        config=config,
        settings=settings,
        role=role,
        catalogs=catalog,
        catalog_watch=catalog_watch,
        directory=directory,
        obs=obs,
        clock_check=clock_check,
        rng=rng,
        breakers=breakers,
        http=http,
        custom_http=custom_http,
        router=router,
    )


def attach_catalog(
    live: LiveCatalog,
    redis: Redis,
    file: Config,
    *,
    directory: TenantDirectory,
    breakers: Breakers,
    env: Mapping[str, str],
) -> CatalogWatch:
    """The catalog watch of one process, with its swaps wired to the process's parts: the
    breakers' sole offers, the tenant directory's configuration (admin validation, identities)
    and the scrubber (every provider key in force is scrubbed from logs and spans).

    Args:
        env: the environment (`env` key references; `TURNOUT_CATALOG_FROM_FILE`).
    """

    def on_swap(config: Config, catalog: Catalog) -> None:
        breakers.transitions.use_sole_targets(catalog.sole_targets)
        directory.config = config
        directory.scrubber.know("catalog", [s for p in config.raw.providers.values() for s in p.secrets()])

    live.on_swap(on_swap)
    return CatalogWatch(live, CatalogStore(redis), file, directory.vault, env)


def require_persistence(
    redis_url: str, settings: Settings, *, role: Role, allow: bool = False, quiet_unreachable: bool = False
) -> Decision:
    """The start-up AOF check of a process of `role` (`turnout.state.persistence`), run before it serves.

    Args:
        redis_url: the process's Redis.
        settings: `allow_no_aof` (`TURNOUT_ALLOW_NO_AOF`) allows a Redis without AOF.
        allow: the `--allow-no-aof` flag (allows too).
        quiet_unreachable: log nothing when Redis does not answer (a repeated check).

    Raises:
        turnout.state.persistence.PersistenceRefused: AOF is off and not allowed.
    """
    return check_persistence(
        redis_url,
        service=f"turnout {role}",
        allow=allow or settings.allow_no_aof,
        env=settings.env,
        quiet_unreachable=quiet_unreachable,
    )


async def require_persistence_later(redis_url: str, settings: Settings, *, role: Role, allow: bool = False) -> Decision:
    """`require_persistence` again, once Redis answers, for a process that started without reaching it.

    Tries every second, in a thread, logging only the decision (as at start).

    Raises:
        turnout.state.persistence.PersistenceRefused: Redis answered, without AOF, and that is not allowed.
    """
    return await require_persistence_when_reachable(
        lambda: require_persistence(redis_url, settings, role=role, allow=allow, quiet_unreachable=True)
    )
