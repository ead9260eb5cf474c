"""What the capture studies (overhead, loss, sched) need before they start:
root, kernel BTF, magnet-read (built if only its sources are there) and the
tools they drive (a missing one stops the study with one line, exit 2)."""
from __future__ import annotations

import shutil
from pathlib import Path

from magnet import capture
from magnet.replay import wire
from magnetlib.errors import MagnetError

from . import common


def ready(*tools: str) -> Path:
    """magnet-read's path once every prerequisite is there (else exit 2)."""
    for tool in tools:
        common.gate(shutil.which(tool) is not None, f"{tool} is not installed (make capture installs it)")
    why = wire.bpf_unavailable()
    common.gate(why is None, f"the BPF capture cannot run here: {why}")
    try:
        return capture.find_magnet_read()
    except MagnetError as e:                   # magnet-read's build failed
        common.gate(False, str(e))


def refused(error: Exception) -> None:
    """The kernel refused the capture (no BPF, lockdown...): one line, exit 2."""
    common.gate(False, f"the capture could not start: {error}")
