"""Study `sndbuf` (PAM 2002 Fig. 11): send-buffer occupancy from the capture's extended data."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from .test_study_traces import run_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """`sndbuf --quick --duration 1`: each case 1 s (--quick's 3); a bulk transfer fills its
    buffer and a stream writes dozens of frames in that."""
    return run_study(tmp_path_factory, "sndbuf", "--duration", "1") / "results"


def test_results_written(study):
    for name in ("README.md", "occupancy.csv", "checks.csv", "paper.csv", "fig11.png"):
        assert (study / name).stat().st_size > 0, name
    assert "write_seq - snd_una" in (study / "README.md").read_text()


def test_occupancy_is_bounded(study):
    """Occupancy >= 0; within the buffer. The kernel checks for room before it starts a new
    skb, not per byte, so a fixed buffer can be overshot by about one skb (64 KB with GSO;
    65856 bytes at most in the full runs)."""
    occ = pd.read_csv(study / "occupancy.csv").set_index(["case", "buffer"])
    assert len(occ) == 6
    assert (occ[["mean_unacked_B", "max_unacked_B", "mean_unsent_B"]] >= 0).all().all()
    assert (occ["max_unsent_B"] <= occ["max_unacked_B"]).all()
    assert (occ["max_unacked_B"] <= occ["limit_B"] + 2 * 65536).all()
    auto = occ.xs("auto", level="buffer")
    assert (auto["max_unacked_B"] <= auto["max_sk_sndbuf_B"] * 1.1).all()
    # A stream far below the rate holds a few frames at most (more only if the sender
    # was late and wrote several at once); a bulk transfer fills the buffer.
    assert 418 <= auto.loc["mp3", "max_unacked_B"] < 10 * 418
    assert auto.loc["ftp", "max_unacked_B"] >= 10240
    fixed = occ.xs("SO_SNDBUF 65536", level="buffer")
    assert fixed.loc["bulk", "max_unacked_B"] >= 0.5 * fixed.loc["bulk", "limit_B"]
    assert fixed.loc["bulk", "max_sk_sndbuf_B"] == 2 * 65536


def test_extended_data_consistent(study):
    """write_seq moves by each write's size; snd_una (almost) never moves back."""
    checks = pd.read_csv(study / "checks.csv")
    assert (checks["write_seq_steps_match"] == checks["write_seq_steps"]).all()
    assert (checks["sock_send"] > 0).all() and (checks["acks_applied"] > 0).all()
    assert (checks["acks_confirmed_next"] >= 0.99 * checks["acks_applied"] - 1).all()
    assert (checks["snd_una_steps_back"] <= np.maximum(2, 0.001 * checks["events_with_tcp_state"])).all()
