"""memcached driven by a small client at a fixed rate (memcache_client.py): 20 SETs of
2000 B values, then 180 GETs of them, one request every 50 ms on one connection,
whether or not the previous answer has arrived (as a cache in front of a periodic job)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .recipe import Commands, Package, Recipe, RecipeError, shell

MEMCACHED = Package("memcached", "/usr/bin/memcached")
PORT = 11211
REQUESTS, KEYS, VALUE, PERIOD_S = 200, 20, 2000, 0.05


class Memcached(Recipe):
    name = "memcached"
    kind = "request-response"
    summary = (f"a fixed-rate client: {KEYS} SETs of {VALUE} B then {REQUESTS - KEYS} GETs, one every "
               f"{PERIOD_S * 1000:.0f} ms on one connection, pipelined when answers lag")
    packages = (MEMCACHED,)
    port = PORT
    requests = REQUESTS
    work_params = ("requests",)
    slow_path_s = 12.0

    def prepare(self, work: Path) -> Commands:
        server = [MEMCACHED.program, "-u", "root", "-l", "0.0.0.0", "-p", str(PORT), "-U", "0",
                  "-m", "64", "-c", "1024"]
        client = shell(f'{sys.executable} -m magnet.experiments.apps.memcache_client '
                       f'--server "$MAGNET_SERVER" --port {PORT} --requests {self.requests} --keys {KEYS} '
                       f'--value {VALUE} --period {PERIOD_S}')
        return Commands(server, client, PORT)

    def verify(self, stdout: str, commands: Commands) -> dict:
        try:
            done = json.loads(stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise RecipeError(self.name, f"the client's output is not its summary: {stdout.strip()[-200:]!r}")
        if done.get("stored") != KEYS or done.get("hits") != self.requests - KEYS:
            raise RecipeError(self.name, f"expected {KEYS} stored and {self.requests - KEYS} hits, got {done}")
        return done
