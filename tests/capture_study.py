"""Running a capture study (overhead, loss, sched) the way the tests do: --quick into a directory."""
from __future__ import annotations

from pathlib import Path

from .conftest import require, require_root, require_tool, run_magnet


def run_quick(study: str, out: Path, *tools: str, options: tuple = ()) -> Path:
    """`magnet experiment STUDY --quick --out OUT [OPTIONS]`; skip (fail under CI) without root,
    BPF or a tool."""
    require_root()
    for tool in tools:
        require_tool(tool)
    proc = run_magnet("experiment", study, "--quick", "--out", out, *options)
    require("no kernel BTF" not in proc.stderr_text and "could not start" not in proc.stderr_text,
            f"BPF capture unavailable: {proc.stderr_text.strip()}")
    assert proc.returncode == 0, proc.stderr_text
    return out
