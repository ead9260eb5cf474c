"""nginx (Debian's nginx-light) serving files from a private directory: a large file to
curl (bulk), and the small files h2load fetches (h2load.py).  HTTP/1.1 on one port and
HTTP/2 without TLS (h2c, prior knowledge) on another."""
from __future__ import annotations

from pathlib import Path

from .recipe import Commands, Fetch, Package, curl, data_file, private_dir

NGINX = Package("nginx-light", "/usr/sbin/nginx")
HTTP1_PORT = 8080
HTTP2_PORT = 8081
BULK_SIZE = 4_000_000

CONFIG = """daemon off;
master_process on;
worker_processes 1;
user root;
pid {dir}/nginx.pid;
error_log stderr;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    sendfile on;
    keepalive_requests 100000;
    default_type application/octet-stream;
    server {{
        listen {http1};
        listen {http2} http2;
        root {dir}/www;
    }}
}}
"""


def nginx_server(work: Path, files: dict[str, int]) -> tuple[list[str], Path]:
    """nginx's command line serving `files` (name -> size) from a private directory."""
    home = private_dir(work, "nginx")
    www = private_dir(home, "www")
    for i, (name, size) in enumerate(sorted(files.items())):
        data_file(www / name, size, seed=1 + i)
    conf = home / "nginx.conf"
    conf.write_text(CONFIG.format(dir=home, http1=HTTP1_PORT, http2=HTTP2_PORT))
    return [NGINX.program, "-p", str(home), "-e", "stderr", "-c", str(conf)], home


class NginxBulk(Fetch):
    name = "nginx-bulk"
    kind = "bulk"
    summary = f"nginx sends a {BULK_SIZE // 1_000_000} MB file to curl over HTTP/1.1 (one connection, sendfile)"
    packages = (NGINX, Package("curl", "/usr/bin/curl"))
    port = HTTP1_PORT
    size = BULK_SIZE
    slow_path_s = 18.0

    def prepare(self, work: Path) -> Commands:
        server, home = nginx_server(work, {"file.bin": self.size})
        return Commands(server, curl(f"http://$MAGNET_SERVER:{HTTP1_PORT}/file.bin"), HTTP1_PORT,
                        {"nginx": home})

