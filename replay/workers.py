"""How a run talks to its worker processes (replay.endpoint, replay.cross): a worker
prints `ready [PORT]` once it listens and one JSON line when it ends, {"error": ...}
if it failed.  Every wait here has a timeout and ends on a signal (magnetlib.signals).

    port = workers.ready(proc)[0]              # WorkerError: why it never got ready
    result = workers.finish(proc, timeout=60)  # its JSON line; WorkerError: why it failed
"""
from __future__ import annotations

import json
import subprocess

from magnetlib import signals

from .errors import ReplayError

# From start to listening: a worker imports numpy in ~1 s, but this shared 2-core machine
# under a load of 20 once took over 30 s.
READY_TIMEOUT_S = 120.0


class WorkerError(ReplayError):
    """Why a worker failed, in one line."""


def first_line(proc: subprocess.Popen, stream=None, timeout: float = READY_TIMEOUT_S) -> str:
    """The first line a process writes on `stream` (default its stdout).  None within
    `timeout` s: WorkerError; then, as on a signal (Interrupted), the process is ended
    here, so one that is not yet anyone's to clean up is not left running."""
    try:
        return signals.readline(stream or proc.stdout, timeout)
    except BaseException as e:
        proc.kill()
        proc.communicate()
        if isinstance(e, TimeoutError):
            raise WorkerError(f"not ready within {timeout:g} s") from None
        raise


def ready(proc: subprocess.Popen, timeout: float = READY_TIMEOUT_S) -> list[str]:
    """The words after `ready` on the worker's first line; WorkerError (the worker
    ended) if it printed anything else or nothing within `timeout` s."""
    words = first_line(proc, timeout=timeout).split()
    if words[:1] == ["ready"]:
        return words[1:]
    try:
        out, err = signals.communicate(proc, 10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    raise WorkerError(failure(proc, " ".join(words) + "\n" + out, err))


def finish(proc: subprocess.Popen, timeout: float) -> dict:
    """The worker's JSON line once it has ended; WorkerError if it failed or took longer
    than `timeout` s (then it is killed)."""
    try:
        out, err = signals.communicate(proc, timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise WorkerError(f"did not finish within {timeout:.0f} s") from None
    result = _json_line(out)
    if proc.returncode != 0 or result is None or "error" in result:
        raise WorkerError(failure(proc, out, err))
    return result


def failure(proc: subprocess.Popen, out: str, err: str) -> str:
    """Why a worker failed: its {"error": ...}, else its last line on stderr, else its status."""
    error = (_json_line(out) or {}).get("error")
    if error:
        return error
    lines = [line for line in (err or "").splitlines() if line.strip()]
    return lines[-1] if lines else f"exited with status {proc.returncode}"


def _json_line(out: str) -> dict | None:
    lines = (out or "").strip().splitlines()
    if not lines or not lines[-1].startswith("{"):
        return None
    try:
        return json.loads(lines[-1])
    except ValueError:
        return None
