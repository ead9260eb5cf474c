"""The capture-cost benchmark (issue 17's targets): every case measured, the
baseline build beside this one, the kernel time per program, the verdicts."""
from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from magnet import capture

from .conftest import require, require_root, require_tool


def test_quick_run_against_a_baseline(tmp_path):
    require_root()
    for tool in ("iperf3", "tcpdump", "ethtool"):
        require_tool(tool)
    try:
        binary = capture.find_magnet_read()
    except capture.CaptureError as e:
        require(False, str(e))
    out = tmp_path / "cost"
    proc = subprocess.run([sys.executable, "-m", "magnet.experiments.bench_capture_cost", "--quick",
                           "--rounds", "1", "--duration", "2", "--stats-duration", "2",
                           "--baseline", str(binary), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    runs = pd.read_csv(out / "runs.csv")
    veth = runs[runs.kind == "veth"]
    assert set(veth.case) == {"no capture", "tcpdump", "magnet net", "magnet sock", "magnet sock,dev",
                              "magnet net, baseline", "magnet sock, baseline"}
    assert (veth.gbps > 0.1).all() and (veth.cpu_s_per_gb > 0).all()
    magnet = veth[veth.case.str.startswith("magnet")]
    # At saturation the default buffer may overflow for a moment (CI once lost 1 event of
    # 4.4 M): such losses are counted in the trace and reported, and stay negligible.
    assert (magnet.events > 0).all() and (magnet.lost <= magnet.events * 1e-4).all()
    stats = runs[runs.kind != "veth"]
    assert set(stats.case) == {"magnet net", "magnet net, baseline"}
    assert ((stats.ns_per_event > 20) & (stats.ns_per_event < 5_000)).all()
    programs = pd.read_csv(out / "programs.csv")
    assert programs.groupby("case").share_pct.sum().to_numpy() == pytest.approx(100.0)
    assert "tp_btf/netif_receive_skb" in set(programs.attach)
    readme = (out / "README.md").read_text()
    for needle in ("target <= 100 ns", "socket layer only", "the application and the wire only",
                   "(baseline)", "Load average before"):
        assert needle in readme, needle
