"""Network namespaces on a private bridge: one "host" per process, for the multi-host benches.

The same layout as `run.sh`: a bridge `br0` in a namespace of its own, and per
host namespace one veth (`eth0`) plugged into it with an address in
10.213.0.0/24. Nothing is added to the machine's own namespace and no
namespace has a route out, so every packet stays between the run's own
namespaces. Needs root and iproute2 (`ip`).

    with Namespaces("tns-net", {"tns-redis": 10, "tns-client": 21}) as net:
        net.address("tns-redis")                 # "10.213.0.10"
        net.exec_argv("tns-client", ["python", "x.py"])  # ["ip", "netns", "exec", "tns-client", ...]

Leaving the `with` block deletes every namespace it created (their veths go
with them), whatever happened inside.
"""

from __future__ import annotations

import subprocess
from types import TracebackType

NET = "10.213.0"
"""The run's private /24: it exists only on the veths inside the run's namespaces."""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def existing_namespaces() -> set[str]:
    """The names `ip netns list` shows (its lines read `NAME` or `NAME (id: N)`)."""
    out = subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, text=True, timeout=30).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


class Namespaces:
    """A bridge namespace and host namespaces `{name: last octet}` on it; created on enter, deleted on exit.

    Raises `RuntimeError` on enter when one of the names already exists (an earlier run still going, or
    killed before its cleanup); `subprocess.CalledProcessError` when `ip` refuses a step (what was made
    is deleted first).
    """

    def __init__(self, bridge_ns: str, hosts: dict[str, int]) -> None:
        self.bridge_ns = bridge_ns
        self.hosts = dict(hosts)
        self.created: list[str] = []

    def address(self, ns: str) -> str:
        """The IPv4 address of host namespace `ns` on the bridge."""
        return f"{NET}.{self.hosts[ns]}"

    @staticmethod
    def exec_argv(ns: str, argv: list[str]) -> list[str]:
        """`argv` run inside namespace `ns` (`ip netns exec` execs it: the child's pid is the command's)."""
        return ["ip", "netns", "exec", ns, *argv]

    def create(self) -> None:
        """Make the bridge and every host namespace, each with its address on `eth0` and `lo` up."""
        taken = existing_namespaces() & {self.bridge_ns, *self.hosts}
        if taken:
            raise RuntimeError(
                f"network namespace(s) {', '.join(sorted(taken))} already exist (an earlier run still going, "
                f"or killed?); remove them with: ip netns del NAME"
            )
        try:
            self._add(self.bridge_ns)
            _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.bridge_ns, "link", "set", "br0", "up")
            for ns, octet in self.hosts.items():
                self._add(ns)
                port = f"p-{ns}"[:15]  # an interface name has at most 15 characters
                _ip("-n", self.bridge_ns, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("-n", self.bridge_ns, "link", "set", port, "master", "br0")
                _ip("-n", self.bridge_ns, "link", "set", port, "up")
                _ip("-n", ns, "addr", "add", f"{NET}.{octet}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.remove()
            raise

    def _add(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self.created.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def remove(self) -> None:
        """Delete every namespace this object created, newest first (a failed delete is skipped)."""
        while self.created:
            subprocess.run(["ip", "netns", "del", self.created.pop()], capture_output=True, timeout=30, check=False)

    def __enter__(self) -> Namespaces:
        self.create()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.remove()
