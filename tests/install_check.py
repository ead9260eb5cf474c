"""magnet as a user installs it: a wheel built from a copy of the checkout (then
deleted), installed into a fresh virtualenv, every command run from a scratch
directory with no checkout in reach.

    python -m tests.install_check [--keep]       # make install-check; CI runs it

Each step prints one line; the first failure stops the check with its output
and exit status 1.  Steps that need root, BPF or ns-3 run when those are here,
and under CI (CI set) their absence is a failure.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                "results", "magnet-results", "out", ".hypothesis", ".pytest_cache")


class Failed(Exception):
    pass


def run(cmd: list[str], cwd: Path, env: dict | None = None, expect: int = 0, timeout: float = 900):
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    shown = " ".join(str(c) for c in cmd)
    if proc.returncode != expect:
        raise Failed(f"{shown}: exit {proc.returncode} (expected {expect})\n{proc.stdout[-3000:]}"
                     f"\n{proc.stderr[-3000:]}")
    print(f"  ok ({time.monotonic() - started:5.1f} s)  {shown}", flush=True)
    return proc


def build_wheel(scratch: Path) -> Path:
    """A wheel from a copy of the checkout; the copy is deleted before anything is installed."""
    source, dist = scratch / "source", scratch / "dist"
    shutil.copytree(REPO, source, ignore=IGNORE)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)], scratch)
    shutil.rmtree(source)
    wheels = sorted(dist.glob("magnet-*.whl"))
    if len(wheels) != 1:
        raise Failed(f"expected one wheel in {dist}, found {wheels}")
    return wheels[0]


def fresh_venv(scratch: Path, wheel: Path) -> Path:
    venv = scratch / "venv"
    run([sys.executable, "-m", "venv", str(venv)], scratch)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    run(pip + [str(wheel)], scratch)
    run(pip + ["--no-deps", "ns3==3.44.*"], scratch)
    return venv / "bin"


def prerequisite(what: str, missing: str | None) -> bool:
    """Whether a step can run; under CI a missing prerequisite fails the check."""
    if missing is None:
        return True
    if os.environ.get("CI"):
        raise Failed(f"{what}: {missing} (CI is set: prerequisites must be here)")
    print(f"  skipped {what}: {missing}")
    return False


def files_of(venv: Path) -> set[Path]:
    """The venv's files, byte-code caches aside (Python writes those wherever it may)."""
    return {p for p in venv.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def checks(bin_dir: Path, work: Path) -> None:
    magnet, python = str(bin_dir / "magnet"), str(bin_dir / "python")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    installed = files_of(bin_dir.parent)
    run([magnet, "synth", "ftp", "--duration", "5", "-o", "ftp.magnet"], work, env)
    run([magnet, "info", "ftp.magnet"], work, env)
    run([magnet, "demand", "ftp.magnet", "-o", "demand.csv"], work, env)
    run([magnet, "stats", "ftp.magnet"], work, env)
    run([magnet, "to-pcap", "ftp.magnet", "-o", "ftp.pcap"], work, env)
    run([magnet, "pcap-info", "ftp.pcap"], work, env)
    # The C loops ship as sources and build on first use (a compiler is here: they must).
    run([python, "-c", "from magnetlib import accumulate, scan; from magnetlib.pcap import fast; "
                       "assert accumulate.c_loops() and fast.c_loops() and scan.c_loops()"], work, env)
    for name in ("replay", "experiments", "capture"):
        run([python, "-c", f"import {name}"], work, env, expect=1)
    run([python, "-c", "import magnet.replay, magnet.experiments, magnet.capture, magnetlib"], work, env)
    run([magnet, "replay", "ns3", "demand.csv", "--stacks", "2", "--cc", "cubic", "--rate", "20mbit",
         "--delay", "30ms", "-o", "ns3-out"], work, env)
    root = None if os.geteuid() == 0 else "not root"
    if prerequisite("replay tcp", root):
        run([magnet, "replay", "tcp", "demand.csv", "--stacks", "2", "--cc", "cubic", "--rate", "20Mbps",
             "-o", "tcp-out"], work, env)
    if prerequisite("capture", root or (None if shutil.which("clang") else "no clang")):
        run([magnet, "capture", "-o", "curl.magnet", "--", python, "-c",
             "import socket; s = socket.create_server(('127.0.0.1', 0)); c = socket.create_connection("
             "s.getsockname()); a, _ = s.accept(); c.sendall(b'x' * 100000); c.close(); "
             "n = 0\nwhile (b := a.recv(65536)): n += len(b)\nassert n == 100000"], work, env)
        run([magnet, "info", "curl.magnet"], work, env)
    if prerequisite("capture --preload", None if shutil.which("cc") else "no C compiler"):
        run([magnet, "capture", "--preload", "-o", "preload.magnet", "--", python, "-c",
             "import socket; s = socket.create_server(('127.0.0.1', 0)); c = socket.create_connection("
             "s.getsockname()); c.sendall(b'x' * 100000)"], work, env)
        run([magnet, "info", "preload.magnet"], work, env)
    run([magnet, "experiment", "multistack", "--quick", "--out", "multistack"], work, env, timeout=1800)
    leaked = sorted(files_of(bin_dir.parent) - installed)
    if leaked:
        raise Failed(f"files written inside the installed package: {leaked[:5]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.install_check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = p.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="magnet-install-"))
    try:
        print(f"install check in {scratch}:", flush=True)
        wheel = build_wheel(scratch)
        bin_dir = fresh_venv(scratch, wheel)
        work = scratch / "work"
        work.mkdir()
        checks(bin_dir, work)
    except (Failed, subprocess.TimeoutExpired) as e:
        print(f"install check failed: {e}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print("install check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
