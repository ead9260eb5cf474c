"""What the capture studies (overhead, loss, sched) need before they start:
root, kernel BTF, magnet-read (built if only its sources are there) and the
tools they drive (a missing one stops the study with one line, exit 2), and
what their --quick setting changes."""
from __future__ import annotations

import shutil
from pathlib import Path

from magnet import capture
from magnet.replay import wire

from . import common


def ready(*tools: str) -> Path:
    """magnet-read's path once every prerequisite is there (else exit 2)."""
    for tool in tools:
        common.gate(shutil.which(tool) is not None, f"{tool} is not installed (make capture installs it)")
    why = wire.bpf_unavailable()
    common.gate(why is None, f"the BPF capture cannot run here: {why}")
    return capture.find_magnet_read()


def refused(error: Exception) -> None:
    """The kernel refused the capture (no BPF, lockdown...): one line, exit 2."""
    common.gate(False, f"the capture could not start: {error}")


def quick(parser, args, **settings) -> None:
    """--quick: these settings, for the options the command line left at their defaults."""
    if args.quick:
        for name, value in settings.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
