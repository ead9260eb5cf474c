"""Run one recipe of the suite across an emulated path.

    result = run.run(RECIPES["nginx-bulk"], NetPath(rate_bps=10_000_000, delay_ns=30_000_000), work)
    result.work            # what the client did ({"bytes": ...}), checked by the recipe
    result.versions        # the packages' versions

The server starts in the server's namespace, the run waits until it listens on the
recipe's port (from the namespace's socket table, so no probe connection shows up in a
capture), the client runs in the client's namespace with MAGNET_SERVER set, and then
every process left in either namespace is ended: nothing outlives the run.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from magnet.replay import netns, wan
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario

from .recipe import Commands, Recipe, RecipeError

READY_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 300.0


@dataclass
class Run:
    app: str
    path: str
    work: dict
    versions: dict[str, str]
    seconds: float                          # the client's run, start to exit
    commands: Commands
    namespaces: dict[str, int] = field(default_factory=dict)   # side -> netns inode (for checks)


def listening(ns: str, port: int) -> bool:
    """Whether something in namespace `ns` listens on TCP `port`."""
    out = netns.sh("ss", "-Hltn", f"sport = :{port}", ns=ns, check=False).stdout
    return bool(out.strip())


def wait_ready(ns: str, port: int, server: subprocess.Popen, app: str, log: Path,
               timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not listening(ns, port):
        if server.poll() is not None:
            raise RecipeError(app, f"the server exited with status {server.returncode} before "
                                   f"listening on port {port}: {last_line(log)}")
        if time.monotonic() > deadline:
            raise RecipeError(app, f"the server did not listen on port {port} within {timeout:.0f} s: "
                                   f"{last_line(log)}")
        time.sleep(0.05)


def last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return lines[-1].strip() if lines else "no message"


def end_namespace(ns: str, grace_s: float = 5.0) -> None:
    """End every process in `ns`: TERM, then KILL whatever is left after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        pids = ns_pids(ns)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = ns_pids(ns)
        if not pids:
            return


def ns_pids(ns: str) -> list[int]:
    out = netns.sh("ip", "netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split()]


def ns_inode(ns: str) -> int:
    return os.stat(f"/run/netns/{ns}").st_ino


@dataclass
class Outcome:
    """What running a pair of commands across a path gave."""
    client: subprocess.CompletedProcess
    seconds: float
    namespaces: dict[str, int]


def execute(commands: Commands, path: NetPath, work: Path, app: str,
            timeout: float = CLIENT_TIMEOUT_S) -> Outcome:
    """The server in the server's namespace (on the path's sending side), the client, once
    the server listens, in the client's; then every process in both namespaces ended."""
    prefix = f"mgap{os.getpid()}"
    with wan.build(prefix, Scenario(stacks=1, path=(path,)), work, subnet="10.206") as net:
        hop = net.stack(1)
        server_ns, client_ns = hop.left_ns, hop.right_ns
        inodes = {"server": ns_inode(server_ns), "client": ns_inode(client_ns)}
        log = work / "server.log"
        with open(log, "wb") as out:
            server = netns.popen(server_ns, commands.server, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
        try:
            wait_ready(server_ns, commands.port, server, app, log)
            start = time.monotonic()
            client = subprocess.run(["ip", "netns", "exec", client_ns, "env",
                                     f"MAGNET_SERVER={hop.left_addr}", *commands.client],
                                    capture_output=True, text=True, timeout=timeout,
                                    stdin=subprocess.DEVNULL, cwd=work)
            seconds = time.monotonic() - start
        finally:
            end_namespace(client_ns)
            end_namespace(server_ns)
            server.wait()
    (work / "client.log").write_text(client.stdout + client.stderr)
    return Outcome(client, seconds, inodes)


def run(recipe: Recipe, path: NetPath, work: Path, label: str = "",
        timeout: float = CLIENT_TIMEOUT_S) -> Run:
    """One run of `recipe` across `path`: its work checked, its versions recorded."""
    why = recipe.missing()
    if why:
        raise RecipeError(recipe.name, why.split(": ", 1)[1])
    work.mkdir(parents=True, exist_ok=True)
    commands = recipe.prepare(work)
    outcome = execute(commands, path, work, recipe.name, timeout)
    if outcome.client.returncode:
        raise RecipeError(recipe.name, f"the client exited with status {outcome.client.returncode}: "
                                       f"{last_line(work / 'client.log')}")
    done = recipe.verify(outcome.client.stdout, commands)
    return Run(recipe.name, label or path.describe(), done, recipe.versions(), outcome.seconds,
               commands, outcome.namespaces)
