"""OpenSSH: scp (SFTP protocol, OpenSSH 9's default) fetches a 2 MB file from sshd: bulk
transfer through ssh's own windows and encryption.  sshd runs from a private config with
its own host key and lets root in with a key made for the run only."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .recipe import Commands, Fetch, Package, RecipeError, data_file, private_dir, shell

SSHD = Package("openssh-server", "/usr/sbin/sshd")
SCP = Package("openssh-client", "/usr/bin/scp")
KEYGEN = Package("openssh-client", "/usr/bin/ssh-keygen")
PORT = 22
SIZE = 2_000_000
PRIVSEP_DIR = "/run/sshd"           # sshd refuses to start without its privilege-separation directory

CONFIG = """Port {port}
ListenAddress 0.0.0.0
HostKey {dir}/host_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
Subsystem sftp internal-sftp
"""

SSH_OPTIONS = ("-F /dev/null -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
               "-o BatchMode=yes -o LogLevel=ERROR")


def keygen(path: Path) -> None:
    proc = subprocess.run([KEYGEN.program, "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                          capture_output=True, text=True)
    if proc.returncode:
        raise RecipeError("scp", f"ssh-keygen: {proc.stderr.strip()}")


class Scp(Fetch):
    name = "scp"
    kind = "bulk"
    summary = f"scp fetches a {SIZE // 1_000_000} MB file from sshd (SFTP protocol, one connection)"
    packages = (SSHD, SCP)
    port = PORT
    size = SIZE
    slow_path_s = 17.0

    def prepare(self, work: Path) -> Commands:
        home = private_dir(work, "sshd")
        data_file(home / "file.bin", self.size)
        keygen(home / "host_key")
        keygen(home / "client_key")
        (home / "authorized_keys").write_bytes((home / "client_key.pub").read_bytes())
        conf = home / "sshd_config"
        conf.write_text(CONFIG.format(port=PORT, dir=home))
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
        fetched = private_dir(work, "scp-client") / "file.bin"
        client = shell(f'{SCP.program} -q {SSH_OPTIONS} -i "{home}/client_key" '
                       f'root@"$MAGNET_SERVER":"{home}/file.bin" "{fetched}" && stat -c "bytes=%s" "{fetched}"')
        return Commands([SSHD.program, "-D", "-e", "-f", str(conf)], client, PORT,
                        {"sshd": home, "fetched": fetched})

