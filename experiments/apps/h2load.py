"""h2load (nghttp2-client) against nginx: many short flows.  HTTP/1.1: 200 requests for a
10 kB file over 50 connections, opened 5 every 100 ms (4 requests each, one at a time);
HTTP/2 (h2c): the same 200 requests over 5 connections, 10 streams at once on each."""
from __future__ import annotations

import re
from pathlib import Path

from .nginx import HTTP1_PORT, HTTP2_PORT, NGINX, nginx_server
from .recipe import Commands, Package, Recipe, RecipeError, shell

H2LOAD = Package("nghttp2-client", "/usr/bin/h2load")
REQUESTS = 200
OBJECT = 10_000


class H2load(Recipe):
    kind = "short-flows"
    packages = (NGINX, H2LOAD)
    options: str = ""
    url_port: int = 0
    requests: int = REQUESTS
    work_params = ("requests",)

    def prepare(self, work: Path) -> Commands:
        server, home = nginx_server(work, {"object.bin": OBJECT})
        client = shell(f'{H2LOAD.program} {self.options} -n {self.requests} '
                       f'"http://$MAGNET_SERVER:{self.url_port}/object.bin"')
        return Commands(server, client, self.port, {"nginx": home})

    def verify(self, stdout: str, commands: Commands) -> dict:
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed",
                      stdout)
        if not m:
            raise RecipeError(self.name, f"h2load's output has no requests line: {stdout.strip()[-200:]!r}")
        total, _, done, ok, failed = map(int, m.groups())
        if ok != self.requests or failed:
            raise RecipeError(self.name, f"{ok} of {self.requests} requests succeeded ({failed} failed)")
        traffic = re.search(r"traffic: .*?\((\d+)\) total", stdout)
        protocol = re.search(r"Application protocol: (\S+)", stdout)
        return {"requests": ok, "bytes": int(traffic.group(1)) if traffic else None,
                "protocol": protocol.group(1) if protocol else "unknown"}


class H2loadHttp1(H2load):
    name = "h2load-h1"
    summary = (f"h2load --h1: {REQUESTS} requests for a {OBJECT // 1000} kB file from nginx over 50 "
               "HTTP/1.1 connections opened 5 per 100 ms (4 requests each)")
    options = "--h1 -c 50 -r 5 --rate-period 100ms -m 1"
    port = url_port = HTTP1_PORT
    slow_path_s = 10.0


class H2loadHttp2(H2load):
    name = "h2load-h2"
    summary = (f"h2load (HTTP/2 over cleartext, prior knowledge): {REQUESTS} requests for a "
               f"{OBJECT // 1000} kB file from nginx over 5 connections, 10 streams at once each")
    options = "-c 5 -m 10"
    port = url_port = HTTP2_PORT
    slow_path_s = 9.0
