"""vsftpd sending a file to curl over FTP (passive mode): the live workload of the
modulation map (`magnet experiment modmap`, experiments/ftp_server.py), with its file
size and configuration: two connections, the control one and the data one (sendfile)."""
from __future__ import annotations

from pathlib import Path

from ..ftp_server import CONFIG, VSFTPD
from .recipe import Commands, Fetch, Package, curl, data_file, private_dir

PORT = 21
SIZE = 4_000_000                       # modmap's default --file-size


class Vsftpd(Fetch):
    name = "vsftpd"
    kind = "bulk"
    summary = f"vsftpd sends a {SIZE // 1_000_000} MB file to curl (FTP, passive mode; modmap's workload)"
    packages = (Package("vsftpd", VSFTPD), Package("curl", "/usr/bin/curl"))
    port = PORT
    size = SIZE
    slow_path_s = 19.0

    def prepare(self, work: Path) -> Commands:
        home = private_dir(work, "vsftpd")
        root, empty = private_dir(home, "root"), private_dir(home, "empty")
        data_file(root / "file.bin", self.size)
        conf = home / "vsftpd.conf"
        conf.write_text(CONFIG.format(address="0.0.0.0", root=root, empty=empty))
        return Commands([VSFTPD, str(conf)], curl("ftp://$MAGNET_SERVER/file.bin"), PORT, {"vsftpd": home})

