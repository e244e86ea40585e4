"""The objects one ingress process serves with (`IngressState`), in a module of their own.

Owns: the ingress's share of the composition root — the shared runtime
(`turnout.runtime.build_runtime`, the same as a worker's) plus what only an
ingress has: its job queue (with its reply channel and its view of the
fleet's capacity, `FleetWatch`, for shedding at the door), its limiter, its
Redis clients and its draining flag. Every ingress module takes the state from
here, never from `app` (which imports them).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable

from redis.asyncio import Redis

from turnout.catalog import Catalog
from turnout.config import Config
from turnout.observability.telemetry import job_trace
from turnout.observability.tracing import Telemetry
from turnout.runtime import build_runtime
from turnout.settings import Settings
from turnout.state import keys
from turnout.state.fleet import FleetWatch
from turnout.state.jobs import JobQueue, ReplicaWait
from turnout.state.response_store import ResponseStore
from turnout_ingress.limits.admission import Limiter


class IngressState:
    """Objects built once per ingress process.

    Args:
        config: the validated configuration.
        redis: the request path's client (bounded socket timeouts).
        listen_redis: a client without a socket read timeout (pub/sub).
        settings: the process's settings.
        telemetry: providers to use instead of building them from the environment.
        clock: epoch seconds (a request's arrival, the time left of its deadline).
    """

    def __init__(
        self,
        config: Config,
        redis: Redis,
        listen_redis: Redis,
        settings: Settings,
        telemetry: Telemetry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.runtime = build_runtime(config, redis, settings, role="ingress", telemetry=telemetry)
        self.config = config
        self.settings = settings
        self.catalogs = self.runtime.catalogs  # models and providers: Redis, swapped whole on change
        self.catalog_watch = self.runtime.catalog_watch
        self.clock_check = self.runtime.clock_check
        self.keyring = self.runtime.directory  # gateway keys, BYOK, endpoints: Redis (SPEC §6)
        self.redis = redis
        self.ingress_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.listen_redis = listen_redis
        self.obs = self.runtime.obs
        self.metrics = self.obs.metrics
        tracer = self.obs.telemetry.tracing  # None: tracing off, the job carries no trace context
        self.rng = self.runtime.rng
        self.fleet = FleetWatch(redis)  # the workers' slots and service time: the door's wait estimate
        self.queue = JobQueue(
            redis,
            listen_redis=listen_redis,
            ingress_id=self.ingress_id,
            max_depth=config.raw.gateway.max_queue_depth,
            around_enqueue=None if tracer is None else job_trace,
            fleet=self.fleet,
            also={keys.HEALTH_CHANNEL: self.runtime.breakers.reads.forget},  # the health reads kept a moment
            rng=self.rng,
            clock=clock,
            replica_wait=ReplicaWait.of(settings.enqueue_wait_replicas, settings.enqueue_wait_ms),
        )
        self.draining = False
        self.persistence_refused = False  # Redis answered after the start, without AOF: the process stops
        self.freeze_heap = False  # set by the process entry point: freeze the start-up heap once started
        self.config_refused = False  # the file's orgs do not fit the catalog in force: the process stops
        self.keys_refused = False  # the catalog's sealed provider keys do not open here (`turnout.catalog.key_check`)
        self.stop_serving: Callable[[], None] | None = None  # set by `turnout ingress` (uvicorn's exit)
        self.limiter = Limiter(redis)
        gateway = config.raw.gateway
        self.responses = ResponseStore(  # the Responses surface's conversations (`surfaces.responses`)
            redis,
            ttl_s=gateway.responses_ttl_s,
            per_org=gateway.responses_per_org,
            max_bytes=gateway.responses_max_bytes,
            clock=clock,
        )
        self.breakers = self.runtime.breakers
        self.http = self.runtime.http
        self.custom_http = self.runtime.custom_http
        self.router = self.runtime.router

    @property
    def catalog(self) -> Catalog:
        """The catalog in force now (`turnout.catalog.live`); a request reads it once and keeps it."""
        return self.catalogs.current
