"""redis-server (7.0) under two of redis's own clients: redis-benchmark's closed-loop load
(request/response on 10 connections at once) and redis-cli asking at a fixed pace (one
request, its answer, 100 ms of think time, the next: a request rate the path slows only by
its round trip)."""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from .recipe import Commands, Package, Recipe, RecipeError, private_dir, shell

SERVER = Package("redis-server", "/usr/bin/redis-server")
TOOLS = Package("redis-tools", "/usr/bin/redis-benchmark")
CLI = Package("redis-tools", "/usr/bin/redis-cli")
PORT = 6379

CONFIG = """port {port}
bind 0.0.0.0
protected-mode no
daemonize no
save ""
appendonly no
dir {dir}
logfile ""
"""

BENCH_REQUESTS, BENCH_CLIENTS, BENCH_SIZE, BENCH_TESTS = 500, 10, 256, ("SET", "GET")
PACE_REQUESTS, PACE_THINK_S, PACE_VALUE = 60, 0.1, 4000


def redis_server(work: Path) -> tuple[list[str], Path]:
    home = private_dir(work, "redis")
    conf = home / "redis.conf"
    conf.write_text(CONFIG.format(port=PORT, dir=home))
    return [SERVER.program, str(conf)], home


class RedisBenchmark(Recipe):
    name = "redis-benchmark"
    kind = "request-response"
    summary = (f"redis-benchmark: {BENCH_REQUESTS} SET then {BENCH_REQUESTS} GET of {BENCH_SIZE} B "
               f"values over {BENCH_CLIENTS} connections per test, one request at a time on each")
    packages = (SERVER, TOOLS)
    port = PORT
    requests = BENCH_REQUESTS
    work_params = ("requests",)
    slow_path_s = 21.0

    def prepare(self, work: Path) -> Commands:
        server, home = redis_server(work)
        client = shell(f'{TOOLS.program} -h "$MAGNET_SERVER" -p {PORT} -n {self.requests} '
                       f'-c {BENCH_CLIENTS} -d {BENCH_SIZE} -t {",".join(BENCH_TESTS).lower()} --csv')
        return Commands(server, client, PORT, {"redis": home})

    def verify(self, stdout: str, commands: Commands) -> dict:
        rows = {r["test"]: r for r in csv.DictReader(io.StringIO(stdout)) if "test" in r}
        if set(rows) != set(BENCH_TESTS):
            raise RecipeError(self.name, f"redis-benchmark ran {sorted(rows) or 'no test'}, "
                                         f"not {', '.join(BENCH_TESTS)}")
        return {"requests": self.requests * len(BENCH_TESTS),
                "rps": {t: float(r["rps"]) for t, r in rows.items()}}


class RedisPaced(Recipe):
    name = "redis-paced"
    kind = "request-response"
    summary = (f"redis-cli -r {PACE_REQUESTS} -i {PACE_THINK_S}: {PACE_REQUESTS} GETs of a "
               f"{PACE_VALUE} B value, {PACE_THINK_S * 1000:.0f} ms after each answer (one connection; "
               "another SETs the value first)")
    packages = (SERVER, CLI)
    port = PORT
    requests = PACE_REQUESTS
    work_params = ("requests",)
    slow_path_s = 20.0

    def prepare(self, work: Path) -> Commands:
        server, home = redis_server(work)
        value = private_dir(work, "redis-client") / "value.txt"
        value.write_bytes(b"m" * PACE_VALUE)
        cli = f'{CLI.program} -h "$MAGNET_SERVER" -p {PORT}'
        client = shell(f'{cli} -x SET magnet:value < "{value}" > /dev/null && '
                       f'{cli} -r {self.requests} -i {PACE_THINK_S} GET magnet:value | wc -lc')
        return Commands(server, client, PORT, {"redis": home, "value": value})

    def verify(self, stdout: str, commands: Commands) -> dict:
        m = re.fullmatch(r"\s*(\d+)\s+(\d+)\s*", stdout)
        expected = (self.requests, self.requests * (PACE_VALUE + 1))
        if not m or tuple(map(int, m.groups())) != expected:
            raise RecipeError(self.name, f"expected {expected[0]} answers of {PACE_VALUE} B, "
                                         f"got (lines, bytes) {stdout.strip()!r}")
        return {"requests": self.requests, "bytes": expected[1] - self.requests}
