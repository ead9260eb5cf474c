"""Study 1 (experiments/multistack.py) and `make demo` (experiments/demo.py), run for real:
ns-3 chains, real TCP chains over network namespaces, the BPF capture."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from magnet.experiments import multistack
from magnetlib import demand as demand_mod
from magnet.replay import netns, wire

from .conftest import DEMO_SECONDS, REPO, require, require_root, run_magnet

MSS = 1448


def require_ns3() -> None:
    why = multistack.ns3_available()
    require(why is None, f"ns-3: {why}")


def require_bpf() -> None:
    require_root()
    why = wire.bpf_unavailable()
    require(why is None, f"BPF capture: {why}")


def no_namespaces_left() -> None:
    left = [name for name in netns.listed() if name.startswith("mgxm")]
    assert not left, left


def test_multistack_quick_every_engine(tmp_path):
    """Both demands through every (engine, mode), 2 s of each (--quick's 3 and 5 s held real
    TCP for 40 s of demand, 2 s for 20): every check is of each chain's bytes, sizes and
    spacings, or of the paper's rows, which 2 s of either demand show (ftp 100 writes, paper 16)."""
    require_ns3()
    require_bpf()
    out = tmp_path / "multistack"
    proc = run_magnet("experiment", "multistack", "--quick", "--duration", "2", "--out", out)
    assert proc.returncode == 0, proc.stderr_text
    for name in ("README.md", "runs.csv", "summary.csv", "fig9-bandwidth-ftp.png",
                 "fig9-bandwidth-paper.png", "per-stack-ftp.png", "per-stack-paper.png"):
        assert (out / name).stat().st_size > 0, name
    runs = pd.read_csv(out / "runs.csv")
    chains = runs.groupby(["case", "engine", "mode", "run"])
    assert {key[:3] for key in chains.groups} == {(c, e, m) for c in multistack.CASES
                                                 for e, m in multistack.CONFIGS}
    for key, chain in chains:
        assert list(chain["k"]) == [0, 1, 2, 3, 4], key
        app, stacks = chain.iloc[0], chain.iloc[1:]
        assert app["mean_size"] == (10240 if key[0] == "ftp" else 3284), key
        # Every stack moved the application's bytes (a real capture may miss a few
        # segments, a stack may retransmit a few) in segments of at most one MSS.
        assert np.all(stacks["bytes"] > 0.97 * app["bytes"]), (key, list(stacks["bytes"]))
        assert np.all(stacks["bytes"] < 1.03 * app["bytes"]), (key, list(stacks["bytes"]))
        assert np.all((stacks["mean_size"] > 0) & (stacks["mean_size"] <= MSS)), key
        assert np.all(stacks["mean_spacing_s"] < app["mean_spacing_s"]), key
    assert set(runs.loc[runs["engine"] == "tcp", "method"]) == {"bpf"}
    readme = (out / "README.md").read_text()
    assert "| 1st TCP stack | 1016 B, 0.045 s |" in readme
    assert readme.count("| 4th TCP stack | 723 B, 0.122 s |") == 2 * len(multistack.CONFIGS)
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == len(runs)                       # one run each: one summary row per row
    no_namespaces_left()


@pytest.mark.cpu                 # ns-3 alone: nothing real-time
def test_multistack_says_what_it_skips(tmp_path):
    require_ns3()
    out = tmp_path / "ns3-only"
    proc = subprocess.run([sys.executable, "-m", "magnet.experiments.multistack", "--quick", "--runs", "2",
                           "--engines", "ns-3", "--cases", "paper", "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "tcp skipped: not asked for" in proc.stderr
    readme = (out / "README.md").read_text()
    assert "**Skipped:** tcp skipped: not asked for" in readme
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["engine"]) == {"ns-3"} and set(runs["run"]) == {1, 2}
    # Simulation without loss is deterministic: both runs alike.
    first, second = (part.drop(columns=["run", "seed"]).reset_index(drop=True)
                     for _, part in runs.groupby("run"))
    pd.testing.assert_frame_equal(first, second)


def test_demo_quick(request):
    require_ns3()
    require_bpf()
    proc, out, _ = request.getfixturevalue("demo_quick")       # conftest: run once, its fidelity step shared
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    for step in ("1/4 capturing", "2/4 demand (captured (BPF)", "3/4 replaying", "4/4 replaying",
                 "Table II", "fidelity of http-python on 60ms-10M"):
        assert step in text, step
    assert "unavailable" not in text and "skipped" not in text, text
    # The captured demand is the sender's writes: DEMO_SECONDS of 3284 B every 0.124 s.
    demand = demand_mod.read_demand(out / "demand.magnet")
    assert len(demand) == int(DEMO_SECONDS / 0.124) and set(demand.size) == {3284}
    spacing = np.diff(demand.time_ns) / 1e9
    assert abs(spacing.mean() - 0.124) < 0.005
    table = pd.read_csv(out / "table.csv")
    assert list(table["source"].unique()) == ["paper", "captured", "ns-3", "real TCP"]
    paper = table[table["source"] == "paper"]
    assert list(zip(paper["mean_size_bytes"], paper["mean_spacing_s"])) == multistack.PAPER
    for source in ("ns-3", "real TCP"):
        rows = table[table["source"] == source]
        assert list(rows["k"]) == [0, 1, 2, 3, 4] and rows["mean_size_bytes"].between(1, 65536).all()
    for engine in ("ns3", "tcp"):
        for name in ("bandwidth.png", "modulation.png", "table.csv", "stack-4.magnet"):
            assert (out / engine / name).exists(), (engine, name)
    assert str(out / "ns3") in text and str(out / "tcp") in text
    no_namespaces_left()
