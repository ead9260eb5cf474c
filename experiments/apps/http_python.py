"""Python's own HTTP server sending a file to curl: the cheapest bulk transfer of the
suite (one connection, the server's writes as http.server makes them)."""
from __future__ import annotations

from pathlib import Path

from .recipe import Commands, Fetch, Package, curl, data_file, private_dir

SIZE = 1_000_000
PORT = 8000


class HttpPython(Fetch):
    name = "http-python"
    kind = "bulk"
    summary = f"python3 -m http.server sends a {SIZE // 1_000_000} MB file to curl (one connection)"
    packages = (Package("python3", "/usr/bin/python3"), Package("curl", "/usr/bin/curl"))
    port = PORT
    size = SIZE
    slow_path_s = 5.0

    def prepare(self, work: Path) -> Commands:
        www = private_dir(work, "www")
        data_file(www / "file.bin", self.size)
        server = ["/usr/bin/python3", "-m", "http.server", str(PORT), "--bind", "0.0.0.0",
                  "--directory", str(www)]
        return Commands(server, curl(f"http://$MAGNET_SERVER:{PORT}/file.bin"), PORT, {"www": www})

