"""Run one recipe of the suite across `magnet path` (replay/path.py, docs/path.md).

    result = run.run(RECIPES["nginx-bulk"], NetPath(rate_bps=10_000_000, delay_ns=30_000_000), work,
                     capture=work / "t")                 # t.client.magnet, t.server.magnet
    result.work            # what the client did ({"bytes": ...}), checked by the recipe
    result.versions        # the packages' versions
    result.rtt_ms          # the RTT magnet path measured before the programs

magnet path starts the server in the server's namespace, waits until it listens on the
recipe's port (from the namespace's socket table: no probe connection in the capture),
runs the client in the client's namespace with MAGNET_SERVER set, and ends every process
of both sides when the client exits.  Both run as root: the servers' configurations
(nginx, memcached and mosquitto keep root; sshd and vsftpd need it) say so.
"""
from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from magnet.replay import path as magnet_path
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario

from .recipe import Commands, Recipe, RecipeError

CLIENT_TIMEOUT_S = 300          # no recipe takes a tenth of this on the slowest path it is made for


@dataclass
class Run:
    app: str
    path: str
    work: dict
    versions: dict[str, str]
    seconds: float                          # the client's run, start to exit
    rtt_ms: float                           # measured by magnet path before the programs
    commands: Commands
    traces: dict[str, Path] = field(default_factory=dict)     # side -> trace, with capture


@dataclass
class Outcome:
    """What running a pair of commands across a path gave."""
    status: int
    stdout: str
    seconds: float
    rtt_ms: float
    traces: dict[str, Path]


def execute(commands: Commands, path: NetPath, work: Path, app: str, capture: Path | None = None,
            timeout_s: int = CLIENT_TIMEOUT_S) -> Outcome:
    """The server, then (once it listens) the client, across `path`; PathError from magnet
    path for what cannot run (a server that never listens included)."""
    client = ["timeout", "--kill-after=5", str(timeout_s), *commands.client]
    out, err, log = work / "client.out", work / "client.err", work / "path.log"
    with open(out, "wb") as stdout, open(err, "wb") as stderr, open(log, "w") as said:
        done = magnet_path.run(Scenario(stacks=1, path=(path,)), client, shlex.join(commands.server),
                               ready_port=commands.port, capture=capture, client_user="root",
                               server_user="root", stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                               say=lambda line: print(line, file=said, flush=True))
    text = out.read_text(errors="replace")
    if done.status == 124:
        raise RecipeError(app, f"the client was still running after {timeout_s} s")
    return Outcome(done.status, text, done.elapsed_s, done.rtt.median_ms, dict(done.traces))


def run(recipe: Recipe, path: NetPath, work: Path, label: str = "", capture: Path | None = None) -> Run:
    """One run of `recipe` across `path`: its work checked, its versions recorded."""
    why = recipe.missing()
    if why:
        raise RecipeError(recipe.name, why.split(": ", 1)[1])
    work = work.resolve()                   # the servers' configs name their files absolutely
    work.mkdir(parents=True, exist_ok=True)
    commands = recipe.prepare(work)
    outcome = execute(commands, path, work, recipe.name, capture)
    if outcome.status:
        raise RecipeError(recipe.name, f"the client exited with status {outcome.status}: "
                                       f"{last_line(work / 'client.err')}")
    done = recipe.verify(outcome.stdout, commands)
    return Run(recipe.name, label or path.describe(), done, recipe.versions(), outcome.seconds,
               outcome.rtt_ms, commands, outcome.traces)


def last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return lines[-1].strip()[:200] if lines else "no message"
