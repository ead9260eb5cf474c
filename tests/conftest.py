"""Shared test helpers.

Tests that need root, BPF, ns-3 or a tool skip with the reason where it is
missing; under CI (the CI environment variable set) a missing prerequisite is
a failure instead, so nothing passes by skipping there.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# The signal tests send SIGHUP on purpose, to the suite and to the programs it starts;
# a suite run under nohup inherits SIGHUP ignored (which magnet keeps ignored, as it
# should), so it is put back to its default here for the suite and its children.
signal.signal(signal.SIGHUP, signal.SIG_DFL)

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Examples per fuzz test: a short run in `make test`, a long one in `make fuzz`.
FUZZ_EXAMPLES = int(os.environ.get("MAGNET_FUZZ_EXAMPLES", "300"))


def require(ok: bool, reason: str) -> None:
    """Skip (or, under CI, fail) unless `ok`."""
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"prerequisite missing under CI: {reason}")
    pytest.skip(reason)


def require_tool(name: str) -> str:
    path = shutil.which(name)
    require(path is not None, f"{name} is not installed")
    return path


def ns3_programs():
    """ns3-app's programs built against the `ns3` wheel (skipped, or failed under CI,
    where ns-3 or g++ is missing)."""
    from magnet.replay import ns3
    try:
        ns3.find_ns3()
    except ns3.Ns3Error as e:
        require(False, str(e))
    require_tool("g++")
    return ns3.build()


def require_root() -> None:
    require(os.geteuid() == 0, "needs root")


def require_link_emulator() -> None:
    """What replay.linkem needs: root, ip and /dev/net/tun."""
    require_root()
    require_tool("ip")
    from magnet.replay import linkem
    why = linkem.unavailable()
    require(why is None, f"link emulator: {why}")


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str):
    """A tmpfs of `size` (e.g. "512k") mounted at `path` (created) for the block (root)."""
    require_root()
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    require(mounted.returncode == 0, f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def unprivileged(cmd: list[str]) -> list[str]:
    """`cmd` run as nobody when we are root (to test what a user without root sees)."""
    if os.geteuid() != 0:
        return cmd
    require_tool("setpriv")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]


def run_magnet(*args: str, input: bytes | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run the installed `magnet` command; returns the completed process (text output)."""
    proc = subprocess.run([str(BIN / "magnet"), *map(str, args)], input=input,
                          capture_output=True, timeout=600)
    proc.stdout_text = proc.stdout.decode("utf-8", "replace")
    proc.stderr_text = proc.stderr.decode("utf-8", "replace")
    if check and proc.returncode != 0:
        raise AssertionError(f"magnet {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                             f"{proc.stderr_text}")
    return proc


def assert_clean_error(proc, *needles: str) -> None:
    """Bad input: status 2, one line on stderr naming the problem, no traceback."""
    err = proc.stderr_text
    assert proc.returncode == 2, (proc.returncode, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def magnet():
    return run_magnet


# The demo's transfer in the tests: --quick's 4 s held real TCP for 20 s (the capture, then
# four stacks offline); 2 s (16 writes) show every step and every check of it.
DEMO_SECONDS = 2


@pytest.fixture(scope="session")
def demo_quick(tmp_path_factory):
    """`python -m magnet.experiments.demo --quick --duration DEMO_SECONDS`, run once for the
    suite: (the completed process, its --out, its fidelity study's --work).
    tests/test_study_multistack.py checks the demo; tests/test_study_fidelity.py reads the
    fidelity study the demo ran (the `fidelity --quick --apps http-python --paths 60ms-10M
    --runs 2` it would run itself).  Request it after the test's own requirements
    (request.getfixturevalue)."""
    base = tmp_path_factory.mktemp("demo")
    out, work = base / "demo", base / "work"
    proc = subprocess.run([sys.executable, "-m", "magnet.experiments.demo", "--quick", "--duration",
                           str(DEMO_SECONDS), "--out", str(out), "--work", str(work)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    yield proc, out, work
    shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def numpy_only():
    """magnetlib without its C loops (magnetlib.native), as on a machine without a compiler."""
    old = os.environ.get("MAGNET_NATIVE")
    os.environ["MAGNET_NATIVE"] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["MAGNET_NATIVE"]
        else:
            os.environ["MAGNET_NATIVE"] = old


def both_versions(run, has_c: bool):
    """run() with magnetlib's C loops (when `has_c`: they were built here) and with numpy's."""
    out = [run()] if has_c else []
    with numpy_only():
        out.append(run())
    return out
