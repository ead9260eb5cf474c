"""ns3-app from a user's own ns-3 program, as docs/ns3-replay.md shows it: the C++
program compiled with `python -m magnet.replay.ns3 flags` against the cache's library,
and the Python program through the ns3 wheel's cppyy bindings.  Both programs are
taken from the doc, so the doc and the test cannot drift apart."""
from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from magnetlib import demand as demand_mod
from magnetlib import synth

from .conftest import ns3_programs, require
from .test_ns3_app import COLUMNS, ROWS

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

DOC = Path(__file__).resolve().parents[1] / "docs" / "ns3-replay.md"


@pytest.fixture(scope="module")
def programs():
    return ns3_programs()


def doc_block(heading: str, language: str) -> str:
    """The first ```language block after `heading` in docs/ns3-replay.md."""
    text = DOC.read_text()
    after = text[text.index(heading):]
    return re.search(rf"```{language}\n(.*?)```", after, re.S).group(1)


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "app.csv").write_text(COLUMNS + "\n" + ROWS)
    demand_mod.write_demand(synth.ftp(duration_s=2.0, seed=1), tmp_path / "ftp.magnet")
    return tmp_path


def check_results(out: str, work: Path) -> None:
    lines = [line for line in out.splitlines() if line.startswith("connection ")]
    assert len(lines) == 5 and all(": ok" in line for line in lines), out
    stream = synth.ftp(duration_s=2.0, seed=1).total_bytes
    assert f"stream: {stream} bytes" in out, out
    conns = pd.read_csv(work / "connections.csv")
    assert list(conns.status) == ["ok"] * 5


def test_a_users_cpp_program(programs, inputs):
    source = inputs / "my-sim.cc"
    source.write_text(doc_block("### From C++", "cpp"))
    flags = subprocess.run([sys.executable, "-m", "magnet.replay.ns3", "flags"], capture_output=True,
                           text=True, check=True).stdout
    assert programs.library.exists() and (programs.include / "magnet-app-replay-helper.h").exists()
    build = subprocess.run(["g++", str(source), *shlex.split(flags), "-o", str(inputs / "my-sim")],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(inputs / "my-sim"), "--app=app.csv", "--stream=ftp.magnet"], cwd=inputs,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    check_results(run.stdout, inputs)


def test_a_users_python_program_through_cppyy(programs, inputs):
    require(importlib.util.find_spec("cppyy") is not None,
            "ns-3's Python bindings need cppyy: pip install 'ns3==3.44.*' (make test does)")
    script = inputs / "my_sim.py"
    script.write_text(doc_block("### From Python", "python"))
    # Not from /: the bindings' module search walks the current directory.
    # cppyy compiles the headers it is given: about 20 s of CPU, minutes on a loaded machine.
    run = subprocess.run([sys.executable, str(script)], cwd=inputs, capture_output=True, text=True,
                         timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    check_results(run.stdout, inputs)
