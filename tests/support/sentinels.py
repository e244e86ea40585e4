"""A Redis primary, its replica and three sentinels on 127.0.0.1, for failover tests.

Owns: `start_sentinel_group` (real `redis-server` processes on free ports: a primary with AOF, a
replica of it, and three `redis-server --sentinel` processes from generated `sentinel.conf` files,
quorum 2, `down-after-milliseconds` and `failover-timeout` small), `SentinelGroup.primary_port`
(what the sentinels say now) and `wait_for_failover`.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import redis

from support.procs import Fleet, Proc, free_port, wait_until

SERVICE = "mymaster"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000


@dataclass
class SentinelGroup:
    """The started group: its processes, ports and the fleet's `redis+sentinel://` URL."""

    primary: Proc
    primary_port: int
    replica: Proc
    replica_port: int
    sentinels: list[Proc]
    sentinel_ports: list[int]

    @property
    def url(self) -> str:
        """The URL the fleet is given: every sentinel, the service, database 0."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def current_primary_port(self) -> int | None:
        """The primary's port as the first sentinel that answers names it, or None."""
        for port in self.sentinel_ports:
            try:
                with redis.Redis(port=port, socket_timeout=0.5, socket_connect_timeout=0.5) as client:
                    host_port = client.execute_command("SENTINEL", "get-master-addr-by-name", SERVICE)
            except redis.RedisError:
                continue
            if host_port:
                return int(host_port[1])
        return None

    def wait_for_failover(self, timeout_s: float) -> None:
        """Wait until the sentinels name the replica as the primary and it answers as one."""

        def promoted() -> bool:
            if self.current_primary_port() != self.replica_port:
                return False
            with redis.Redis(port=self.replica_port, socket_timeout=0.5) as client:
                return bool(client.info("replication")["role"] == "master")

        wait_until(promoted, timeout_s, "the sentinels' failover to the replica")


def _server(fleet: Fleet, name: str, port: int, extra: list[str]) -> Proc:
    server = shutil.which("redis-server")
    assert server is not None
    data = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=fleet.workdir))
    argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--save", ""]
    return fleet.spawn(f"{name}-{port}", [*argv, "--appendonly", "yes", "--loglevel", "warning", *extra])


def _sentinel(fleet: Fleet, primary_port: int) -> tuple[Proc, int]:
    server = shutil.which("redis-server")
    assert server is not None
    port = free_port()
    conf = Path(tempfile.mkdtemp(prefix="sentinel-", dir=fleet.workdir)) / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {conf.parent}\n"
        f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n"
        f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
        f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
        f"sentinel parallel-syncs {SERVICE} 1\n"
    )
    return fleet.spawn(f"sentinel-{port}", [server, str(conf), "--sentinel", "--loglevel", "notice"]), port


def _answers(port: int) -> bool:
    with redis.Redis(port=port, socket_timeout=0.5, socket_connect_timeout=0.5) as client:
        return bool(client.ping())


def start_sentinel_group(fleet: Fleet) -> SentinelGroup:
    """Start the primary, its replica (in sync) and three sentinels that all see both (bounded waits).

    Raises:
        TimeoutError: a process did not come up, or the replica did not sync.
    """
    primary_port, replica_port = free_port(), free_port()
    primary = _server(fleet, "primary", primary_port, [])
    wait_until(lambda: _answers(primary_port), 10, "the primary")
    replica = _server(fleet, "replica", replica_port, ["--replicaof", "127.0.0.1", str(primary_port)])

    def synced() -> bool:
        with redis.Redis(port=replica_port, socket_timeout=0.5) as client:
            return bool(client.info("replication").get("master_link_status") == "up")

    wait_until(synced, 15, "the replica's sync")
    started = [_sentinel(fleet, primary_port) for _ in range(3)]
    sentinels, ports = [proc for proc, _ in started], [port for _, port in started]

    def all_see_all() -> bool:
        for port in ports:
            with redis.Redis(port=port, socket_timeout=0.5) as client:
                state = client.sentinel_master(SERVICE)
            if int(state["num-other-sentinels"]) < 2 or int(state["num-slaves"]) < 1:
                return False
        return True

    wait_until(all_see_all, 30, "three sentinels that see each other and the replica")
    return SentinelGroup(primary, primary_port, replica, replica_port, sentinels, ports)
