"""Whole-application demand replayed into real TCP: every connection at once, really run.

The loopback tests need nothing; the others need root (namespaces, the link emulator)
and the BPF capture, and skip with the reason without them (fail under CI).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import magnetlib

from magnetlib import app_demand, connections, synth
from magnetlib.app_demand import CLIENT, OPEN, SEND, SERVER
from magnet.replay import app_tcp, linkem, tcp, wire
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario, cross

from .conftest import BIN, REPO, require, require_root, require_tool, run_magnet

MS = 1_000_000
LOOPBACK = tcp.TcpOptions(loopback=True)


@pytest.fixture
def bpf_namespaces():
    require_root()
    require_tool("ip")
    why = linkem.unavailable() or wire.bpf_unavailable()
    require(why is None, f"namespaces or BPF capture unavailable: {why}")


def three_clients() -> app_demand.AppDemand:
    """Three overlapping request/response connections opened 20 ms apart."""
    return synth.app_requests(connections=3, duration_s=0.4, ramp_s=0.05, request_bytes=300,
                              response_bytes=20000, period_s=0.05, server_think_s=0.005, seed=3)


def opens_of(d: app_demand.AppDemand) -> np.ndarray:
    return d.time_ns[d.event == OPEN]


def best_of_three(attempt) -> float:
    """The smallest of up to three runs' worst errors (ns), stopping at the first within 1 ms:
    a shared 2-core VM stalls a process for milliseconds now and then, which the benchmark
    (make bench) measures; a test must not fail on one such stall."""
    best = None
    for k in range(3):
        worst = attempt(k)
        best = worst if best is None else min(best, worst)
        if best <= MS:
            break
    return best


# --------------------------------------------------------------- loopback ---
def test_loopback_replays_every_connection_at_once(tmp_path):
    """No root: three overlapping connections on 127.0.0.1, all complete, each request after
    the whole previous answer plus its think time, each answer after its whole request,
    the opens at their offsets (the replayer's record)."""
    d = three_clients()

    def attempt(k):
        out = tmp_path / str(k)
        run = app_tcp.run(d, out, Scenario(stacks=1), LOOPBACK)
        assert not run.failed and list(run.connections["status"]) == ["ok"] * 3
        assert (run.connections["bytes_sent"] == [_sent(d, c, CLIENT) for c in (1, 2, 3)]).all()
        assert (run.connections["bytes_received"] == [_sent(d, c, SERVER) for c in (1, 2, 3)]).all()
        starts = run.connections["start_s"].to_numpy()
        assert (starts[1:] < run.connections["completion_s"].to_numpy()[:-1]).all()   # overlapping
        _closed_loop(d, run)
        return float(np.abs(starts * 1e9 - opens_of(d)).max())
    assert best_of_three(attempt) <= MS


def _sent(d, connection, side) -> int:
    return int(d.size[(d.connection == connection) & (d.side == side) & (d.event == SEND)].sum())


def _closed_loop(d, run) -> None:
    """Every ADU that answers another started after that one was read whole, plus the
    answering row's think time (adus.csv, from both sides' records)."""
    adus = run.adus
    answers = adus["response_s"].notna()
    assert answers.sum() == (d.adu[d.event == SEND] > 0).sum()
    prev_end = adus["end_s"].shift(1)
    same = adus["connection"] == adus["connection"].shift(1)
    think = pd.Series(d.think_ns[_first_send_rows(d)] / 1e9)
    later = adus["start_s"] >= prev_end + think - 1e-6
    assert later[same & answers].all()
    assert (adus["response_s"][answers] > 0).all()


def _first_send_rows(d, side=None) -> np.ndarray:
    """Each ADU's first send (of one side), in (connection, adu) order as adus.csv lists them."""
    sends = np.flatnonzero((d.event == SEND) & ((d.side == side) if side is not None else True))
    order = np.lexsort((sends, d.adu[sends], d.connection[sends]))
    sends = sends[order]
    key = d.connection[sends] * 10_000 + d.adu[sends]
    return sends[np.r_[True, key[1:] != key[:-1]]]


def test_open_loop_waits_for_nothing(tmp_path):
    """--open-loop: every row at its time_ns.  The server's answer is set 250 ms before the
    request it waits for: closed-loop it follows the request, open-loop it goes first."""
    path = tmp_path / "d.csv"
    path.write_text("connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after\n"
                    "1,open,client,0,0,-1,0,0,0\n"
                    "1,send,server,50000000,2000,1,300,0,0\n"
                    "1,send,client,300000000,300,0,0,300000000,0\n")
    issued = {}
    for mode, extra in (("closed", []), ("open", ["--open-loop"])):
        proc = run_magnet("replay", "tcp", path, "--loopback", "--no-plots", *extra, "-o", tmp_path / mode)
        assert proc.returncode == 0, proc.stderr_text
        adus = pd.read_csv(tmp_path / mode / "adus.csv").set_index("side")
        issued[mode] = adus["start_s"]
    assert issued["closed"]["server"] > issued["closed"]["client"]
    assert issued["open"]["server"] < issued["open"]["client"] - 0.1


def test_cli_whole_application(tmp_path):
    """`magnet replay tcp D.magnet --loopback`: the tables, and connection 1 alone with --stream."""
    path = tmp_path / "d.magnet"
    app_demand.write(three_clients(), path)
    proc = run_magnet("replay", "tcp", path, "--loopback", "--no-plots", "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr_text
    assert "3 of 3 connections complete" in proc.stdout_text and "client side:" in proc.stdout_text
    for name in ("connections.csv", "adus.csv", "table.csv", "table-response.csv", "summary.json"):
        assert (tmp_path / "out" / name).exists(), name
    one = run_magnet("replay", "tcp", path, "--stream", "1", "--stacks", "1", "--loopback", "--no-plots",
                     "-o", tmp_path / "one")
    assert one.returncode == 0, one.stderr_text
    assert "1st TCP stack" in one.stdout_text


@pytest.mark.parametrize("args,problem", [
    (["--stacks", "2"], "--stacks: a whole-application demand is replayed over one path"),
    (["--send-only"], "--send-only: not for a whole-application demand"),
    (["--mode", "relay"], "--mode: not for a whole-application demand"),
])
def test_cli_refuses_what_a_whole_application_cannot_do(tmp_path, args, problem):
    path = tmp_path / "d.csv"
    app_demand.write(three_clients(), path)
    proc = run_magnet("replay", "tcp", path, "--loopback", *args, "-o", tmp_path / "out")
    assert proc.returncode == 2 and problem in proc.stderr_text, proc.stderr_text
    assert proc.stderr_text.count("\n") == 1


def test_bad_table_refused_by_the_replay(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after\n"
                    "1,send,client,0,10,0,0,0,0\n")
    proc = run_magnet("replay", "tcp", path, "--loopback", "-o", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr_text
    assert proc.stderr_text == f"magnet: {path}: row 1 (connection 1): send before the connection's open\n"


def test_connections_that_cannot_open_fail_the_run(tmp_path):
    """Out of file descriptors: the connections that could not be opened are reported one
    by one, the run exits non-zero with one line, the others complete."""
    require_tool("prlimit")
    path = tmp_path / "d.csv"
    app_demand.write(synth.app_requests(60, 1.0, 0.01, period_s=0.2), path)
    proc = subprocess.run(["prlimit", "--nofile=48:48", str(BIN / "magnet"), "replay", "tcp", str(path),
                           "--loopback", "--no-plots", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "connections failed" in lines[0] and "EMFILE" in lines[0], proc.stderr
    table = pd.read_csv(tmp_path / "out" / "connections.csv")
    failed = table[table["status"] != "ok"]
    assert len(failed) > 0 and failed["status"].str.contains("EMFILE").all()
    assert (table["status"] == "ok").sum() > 0
    ok = table[table["status"] == "ok"]
    assert (ok["bytes_received"] > 0).all() and ok["completion_s"].notna().all()


# ------------------------------------------------------------- namespaces ---
def test_real_application_across_magnet_path_replayed(tmp_path, bpf_namespaces):
    """A real application (tests/app_three.py: three overlapping connections, then one after
    them) run across `magnet path --capture T` gives T.client.magnet and T.server.magnet; they
    become a whole-application demand (each side's think times its own); `magnet replay tcp`
    replays all four over the same kind of path; the replay's own captures (client.magnet,
    server.magnet, HOSTNAME client and server) give back the same connections: opens at
    their offsets within 1 ms, every answer after its whole request and every request after
    the whole previous answer (the same wait_bytes), no row earlier than its think time."""
    app = [sys.executable, str(REPO / "tests" / "app_three.py")]
    path = ["--rate", "20Mbps", "--delay", "5ms"]
    ran = run_magnet("path", *path, "--capture", tmp_path / "T", "--server", " ".join(app + ["server", "9000"]),
                     "--ready", "9000", "--", *app, "client", "9000")
    assert ran.returncode == 0, ran.stderr_text
    built = run_magnet("demand", tmp_path / "T", "--all", "-o", tmp_path / "app.csv")
    assert built.returncode == 0, built.stderr_text
    d = app_demand.read(tmp_path / "app.csv")
    assert len(d.connections) == 4 and list(d.after[d.event == OPEN]) == [0, 0, 0, 3]
    # the server's think times are its own (5 ms and what the machine adds), not the client's
    # view of them (a one-sided demand: the path's 10 ms round trip more)
    own = d.think_ns[_first_send_rows(d, SERVER)]
    one_sided = connections.build([str(tmp_path / "T.client.magnet")])
    seen = one_sided.think_ns[_first_send_rows(one_sided, SERVER)]
    assert (own >= 5 * MS).all() and (seen > own + 9 * MS).all(), (own, seen)

    def attempt(k):
        out = tmp_path / f"out{k}"
        proc = run_magnet("replay", "tcp", tmp_path / "app.csv", *path, "--no-plots", "-o", out)
        assert proc.returncode == 0, proc.stderr_text
        assert "duplex" in proc.stdout_text
        table = pd.read_csv(out / "connections.csv")
        assert list(table["status"]) == ["ok"] * 4
        for side in ("client", "server"):
            assert magnetlib.open(out / f"{side}.magnet").meta.hostname == side
        again = connections.build([str(out / "client.magnet"), str(out / "server.magnet")])
        assert len(again.connections) == 4
        for side in (CLIENT, SERVER):
            mine, theirs = [_by_connection(x.part((x.event == SEND) & (x.side == side))) for x in (d, again)]
            assert np.array_equal(mine.size, theirs.size)
            assert np.array_equal(mine.wait_bytes, theirs.wait_bytes)
            assert (theirs.think_ns >= mine.think_ns - 200_000).all()
        first3 = opens_of(again)[:3] - opens_of(again)[0]
        return float(np.abs(first3 - opens_of(d)[:3]).max())
    assert best_of_three(attempt) <= MS


def _by_connection(d):
    return d.part(np.lexsort((np.arange(len(d)), d.connection)))


def test_whole_application_starts_the_cross_traffics_lead_into_it(tmp_path, bpf_namespaces):
    """With cross traffic the whole application's time zero is the scenario's lead after the
    cross traffic starts (as in ns-3's whole-application replay), not when the set-up ends."""
    d = three_clients()
    scenario = Scenario(stacks=1, path=(NetPath(rate_bps=20_000_000, delay_ns=5 * MS),),
                        cross=(cross("poisson:5%"),))
    run = app_tcp.run(d, tmp_path, scenario, tcp.TcpOptions(cross_lead_ns=1_500_000_000))
    assert not run.failed and list(run.connections["status"]) == ["ok"] * 3
    assert run.cross_lead_ns == 1_500_000_000, run.notes
    assert run.summary()["cross_lead_ns"] == 1_500_000_000
