"""Network namespaces joined by veth pairs, for the capture tests and benchmarks.

    with netns.pair("mgcap1") as net:            # client ns -- veth -- server ns
        net.run_in(net.server, ["iperf3", "-s"])
    with netns.routed("mgcap2", rate="50mbit") as net:   # client -- router (tbf) -- server

Everything created carries the given prefix and is removed on exit.
Offloads are off (tso, gso, gro) so that every packet is one wire segment.
"""
from __future__ import annotations

import subprocess
from contextlib import contextmanager
from dataclasses import dataclass, field


def sh(*cmd: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    proc = subprocess.run(full, capture_output=True, text=True)
    if check and proc.returncode:
        raise RuntimeError(f"{' '.join(full)}: {proc.stderr.strip()}")
    return proc


@dataclass
class Net:
    client: str                      # namespace names
    server: str
    server_addr: str
    client_addr: str
    namespaces: list[str] = field(default_factory=list)
    devices: dict[str, str] = field(default_factory=dict)   # role -> (device) in its namespace

    def run_in(self, ns: str, cmd: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", ns, *cmd], **kw)


def _veth(ns_a: str, dev_a: str, addr_a: str, ns_b: str, dev_b: str, addr_b: str, mtu: int) -> None:
    sh("ip", "link", "add", dev_a, "type", "veth", "peer", "name", dev_b)
    for ns, dev, addr in ((ns_a, dev_a, addr_a), (ns_b, dev_b, addr_b)):
        sh("ip", "link", "set", dev, "netns", ns)
        sh("ip", "addr", "add", addr, "dev", dev, ns=ns)
        sh("ip", "link", "set", dev, "up", "mtu", str(mtu), ns=ns)
        sh("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns)


def _namespaces(names: list[str]) -> None:
    for name in names:
        sh("ip", "netns", "del", name, check=False)
        sh("ip", "netns", "add", name)
        sh("ip", "link", "set", "lo", "up", ns=name)


def _remove(names: list[str]) -> None:
    for name in names:
        sh("ip", "netns", "del", name, check=False)   # takes its veth ends with it


@contextmanager
def pair(prefix: str, subnet: str = "10.199.1", mtu: int = 1500):
    """client ns <-veth-> server ns, addresses subnet.2 and subnet.1."""
    net = Net(client=f"{prefix}-c", server=f"{prefix}-s",
              server_addr=f"{subnet}.1", client_addr=f"{subnet}.2")
    net.namespaces = [net.client, net.server]
    net.devices = {"client": f"{prefix}c0", "server": f"{prefix}s0"}
    try:
        _namespaces(net.namespaces)
        _veth(net.client, net.devices["client"], f"{net.client_addr}/24",
              net.server, net.devices["server"], f"{net.server_addr}/24", mtu)
        yield net
    finally:
        _remove(net.namespaces)


@contextmanager
def routed(prefix: str, rate: str = "50mbit", limit: str = "6kb", subnet: str = "10.199"):
    """client ns -- router ns -- server ns; the router's way to the server is a
    token bucket (tbf) that drops what exceeds `rate`: losses on the path, not
    on the sending host."""
    router = f"{prefix}-r"
    net = Net(client=f"{prefix}-c", server=f"{prefix}-s",
              server_addr=f"{subnet}.2.1", client_addr=f"{subnet}.1.2")
    net.namespaces = [net.client, router, net.server]
    net.devices = {"client": f"{prefix}c0", "router_in": f"{prefix}r0",
                   "router_out": f"{prefix}r1", "server": f"{prefix}s0"}
    try:
        _namespaces(net.namespaces)
        _veth(net.client, net.devices["client"], f"{net.client_addr}/24",
              router, net.devices["router_in"], f"{subnet}.1.1/24", 1500)
        _veth(router, net.devices["router_out"], f"{subnet}.2.2/24",
              net.server, net.devices["server"], f"{net.server_addr}/24", 1500)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=router)
        sh("ip", "route", "add", "default", "via", f"{subnet}.1.1", ns=net.client)
        sh("ip", "route", "add", "default", "via", f"{subnet}.2.2", ns=net.server)
        sh("tc", "qdisc", "add", "dev", net.devices["router_out"], "root", "tbf",
           "rate", rate, "burst", "5kb", "limit", limit, ns=router)
        yield net
    finally:
        _remove(net.namespaces)
