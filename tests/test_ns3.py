"""The ns-3 replay, built and run for real: the C++ TestSuite, the chained-stack scenario, the CLI.

The programs are compiled once per cache key (sources, flags, ns-3); a test
session reuses them.  Without ns-3 or g++ these tests skip (fail under CI).
"""
from __future__ import annotations

import csv
import shutil
import subprocess

import numpy as np
import pytest

import magnetlib
from magnetlib import demand as demand_mod
from magnetlib import synth
from magnetlib.format import Clock, Event
from magnet.replay import ns3, report
from magnet.replay.ns3 import ChainParams

from .conftest import assert_clean_error, require, require_tool, run_magnet


@pytest.fixture(scope="session")
def programs():
    try:
        ns3.find_ns3()
    except ns3.Ns3Error as e:
        require(False, str(e))
    require_tool("g++")
    return ns3.build()


@pytest.fixture(scope="session")
def ftp_demand(tmp_path_factory):
    d = synth.ftp(duration_s=6.0, jitter=0.3, seed=1)       # 10 KB about every 20 ms
    path = tmp_path_factory.mktemp("demand") / "ftp.magnet"
    demand_mod.write_demand(d, path)
    return d, path


def sock_send(path):
    with magnetlib.open(path) as trace:
        return demand_mod.extract(trace.check(), None, "send", "sock")


def layer_bytes(path) -> dict:
    with magnetlib.open(path) as trace:
        return {Event(ev).name: b for ev, b in trace.scan.bytes.items()}


# ------------------------------------------------------------- C++ tests ---
def test_ns3_test_suite_passes(programs):
    proc = ns3.run_tests(programs, "--verbose")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("PASS magnet-replay"), proc.stdout
    assert sum(line.strip().startswith("PASS") for line in lines) == 6, proc.stdout
    assert "FAIL" not in proc.stdout


def test_example_program_replays_a_demand_file(programs, ftp_demand, tmp_path):
    d, path = ftp_demand
    proc = subprocess.run([str(programs.path("magnet-replay-example")), f"--demand={path}",
                           f"--trace={tmp_path / 'x.magnet'}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"delivered: {d.total_bytes} bytes" in proc.stdout
    assert layer_bytes(tmp_path / "x.magnet")["SOCK_RECV"] == d.total_bytes


# ------------------------------------------------------- offline chain ---
@pytest.fixture(scope="module")
def offline_chain(programs, ftp_demand, tmp_path_factory):
    out = tmp_path_factory.mktemp("chain")
    return ns3.run_chain(ftp_demand[1], out, ChainParams(stacks=3), programs=programs)


def test_outputs_parse_with_magnetlib(offline_chain):
    assert len(offline_chain.traces) == 3
    for k, path in enumerate(offline_chain.traces, 1):
        with magnetlib.open(path) as trace:
            trace.check()
            assert trace.meta.clock_source == Clock.SIMULATION
            assert set(np.unique(trace.column("sockid")[trace.header_len:])) == {k}
            assert {Event.SOCK_SEND, Event.TCP_SEND, Event.DEV_SEND, Event.DEV_RECV,
                    Event.SOCK_RECV} <= set(trace.scan.counts)
        table = magnetlib.metrics.modulation(magnetlib.open(path))
        assert set(table["layer"]) == {"sock", "tcp", "dev"}


def test_bytes_conserved_through_every_stack(offline_chain, ftp_demand):
    total = ftp_demand[0].total_bytes
    assert offline_chain.summary["conserved"] is True
    for path in offline_chain.traces:
        b = layer_bytes(path)
        assert b["SOCK_SEND"] == b["TCP_SEND"] == b["DEV_SEND"] == b["DEV_RECV"] == b["SOCK_RECV"] == total


def test_first_stack_writes_match_the_demand_exactly(offline_chain, ftp_demand):
    d = ftp_demand[0]
    writes = sock_send(offline_chain.traces[0])
    np.testing.assert_array_equal(writes.size, d.size)
    np.testing.assert_array_equal(writes.time_ns, d.time_ns - d.time_ns[0])


def test_next_stack_writes_are_the_previous_stacks_wire(offline_chain):
    for before, after in zip(offline_chain.traces, offline_chain.traces[1:]):
        _, wire_ns, wire_size = report.trace_series(before, "wire", "dev")
        writes = sock_send(after)
        np.testing.assert_array_equal(writes.size, wire_size)
        np.testing.assert_array_equal(writes.time_ns, wire_ns - wire_ns[0])


def test_segments_fit_the_mss_on_a_fast_link(programs, ftp_demand, tmp_path):
    run = ns3.run_chain(ftp_demand[1], tmp_path, ChainParams(stacks=1, rate="1Gbps", mss=1000),
                        programs=programs)
    _, _, size = report.trace_series(run.traces[0], "wire", "dev")
    assert size.mean() <= 1000
    assert size.max() == 1000                     # the MSS we set, not ns-3's 536
    assert run.summary["config"]["tcp_settings"]["SegmentSize"] == "1000"


def test_big_endian_extended_demand_replays_like_native(programs, ftp_demand, tmp_path):
    d, native = ftp_demand
    rec = magnetlib.empty_records(len(d), ext=True)        # 144-byte records
    rec["sockid"], rec["timestamp"] = 1, d.time_ns + 10**9
    rec["event"], rec["size"] = Event.SOCK_SEND, d.size
    big = magnetlib.write(tmp_path / "big.magnet", rec, byteorder=">", clock_source=Clock.SYNTHETIC)
    assert magnetlib.open(big).meta.record_size == 144 and magnetlib.open(big).swapped
    runs = [ns3.run_chain(p, tmp_path / name, ChainParams(stacks=1), programs=programs)
            for name, p in (("native", native), ("big", big))]
    a, b = (report.trace_series(r.traces[0], "wire", "dev") for r in runs)
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[2], b[2])


# --------------------------------------------------------- live, loss ---
def test_live_relays_conserve_bytes(programs, ftp_demand, tmp_path):
    run = ns3.run_chain(ftp_demand[1], tmp_path, ChainParams(stacks=3, live=True), programs=programs)
    assert run.summary["conserved"] is True
    for before, after in zip(run.summary["stacks"], run.summary["stacks"][1:]):
        assert after["writes_due"] == before["reads"]       # each read written on
        assert after["bytes_received"] == ftp_demand[0].total_bytes


def test_loss_retransmits_and_the_wire_carries_them_on(programs, ftp_demand, tmp_path):
    params = ChainParams(stacks=2, loss=0.02, seed=3)
    every = ns3.run_chain(ftp_demand[1], tmp_path / "all", params, programs=programs).summary
    fresh = ns3.run_chain(ftp_demand[1], tmp_path / "new", params.replace(new_data_only=True),
                          programs=programs).summary
    total = ftp_demand[0].total_bytes
    first = every["stacks"][0]
    assert first["tcp_retrans"] > 0 and first["dev_retrans"] > 0
    assert first["bytes_received"] == total                   # TCP repaired the loss
    # A capture of the link holds the retransmissions too, and so does the next demand ...
    assert every["stacks"][1]["bytes_due"] == first["dev_send_bytes"] > total
    assert every["conserved"] is True
    # ... unless only new data is carried on.
    assert fresh["stacks"][1]["bytes_due"] == total


# -------------------------------------------------------------------- CLI ---
def test_cli_prints_table_ii_and_writes_csv_and_plots(programs, tmp_path):
    out = tmp_path / "out"
    proc = run_magnet("replay", "ns3", "synth:ftp-paper", "--duration", "4", "--stacks", "2",
                      "--rate", "10e6", "--delay", "0.03", "-o", out, check=True)
    text = proc.stdout_text
    assert "10Mbps, 30ms one-way" in text and "SegmentSize=1448" in text
    for label in ("Application", "1st TCP stack", "2nd TCP stack", "data size B", "spacing s"):
        assert label in text, text
    with open(out / "table.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["label"] for r in rows] == ["Application", "1st TCP stack", "2nd TCP stack"]
    assert [r["k"] for r in rows] == ["0", "1", "2"]
    assert float(rows[0]["mean_size_bytes"]) == 3284
    for name in ("bandwidth.png", "modulation.png", "stack-1.magnet", "stack-2.magnet",
                 "demand.magnet", "summary.json"):
        assert (out / name).stat().st_size > 0, name


def test_cli_sweep_runs_every_combination(programs, tmp_path):
    out = tmp_path / "sweep"
    proc = run_magnet("replay", "ns3", "synth:ftp", "--duration", "2", "--stacks", "1",
                      "--sweep", "rate=10e6,50e6", "--sweep", "tcp=TcpNewReno,TcpCubic",
                      "--no-plots", "--jobs", "2", "-o", out, check=True)
    with open(out / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["rate"], r["tcp"]) for r in rows} == {
        ("10Mbps", "TcpNewReno"), ("10Mbps", "TcpCubic"), ("50Mbps", "TcpNewReno"),
        ("50Mbps", "TcpCubic")}
    assert len(rows) == 8                                   # Application + 1 stack, 4 runs
    assert "TcpCubic" in proc.stdout_text
    assert (out / "rate=50Mbps,tcp=TcpCubic" / "stack-1.magnet").exists()


def test_cli_bad_input_is_one_clear_line(programs, tmp_path):
    assert_clean_error(run_magnet("replay", "ns3", tmp_path / "missing.magnet", "-o", tmp_path),
                       "missing.magnet")
    assert_clean_error(run_magnet("replay", "ns3", "synth:ftp", "--tcp", "TcpNope", "--duration", "1",
                                  "-o", tmp_path), "unknown TCP variant 'TcpNope'")
    assert_clean_error(run_magnet("replay", "ns3", "synth:ftp", "--sweep", "colour=red",
                                  "-o", tmp_path), "unknown key 'colour'")
    assert_clean_error(run_magnet("replay", "ns3", "synth:nope", "-o", tmp_path), "unknown workload")
    two = tmp_path / "two.csv"
    two.write_text("sockid,time_ns,direction,size\n1,0,send,10\n2,5,send,20\n")
    assert_clean_error(run_magnet("replay", "ns3", two, "-o", tmp_path), "--stream")


def test_missing_ns3_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("MAGNET_NS3_ROOT", str(tmp_path / "no-ns3"))
    proc = run_magnet("replay", "ns3", "synth:ftp", "--duration", "1", "-o", tmp_path / "o")
    assert_clean_error(proc, "pip install --no-deps ns3")


# ------------------------------------------------------------------ build ---
def test_build_key_follows_the_sources(programs, tmp_path, monkeypatch):
    copy = tmp_path / "ns3-app"
    shutil.copytree(ns3.APP_DIR, copy)
    monkeypatch.setattr(ns3, "APP_DIR", copy)
    key = ns3.build_key(programs.ns3, "g++")
    assert ns3.build_key(programs.ns3, "g++") == key
    src = copy / "model" / "magnet-replay-application.cc"
    src.write_text(src.read_text() + "\n// changed\n")
    assert ns3.build_key(programs.ns3, "g++") != key
    assert (programs.directory / ".complete").exists()


def test_cli_says_when_the_capture_lost_records(programs, tmp_path):
    rec = magnetlib.empty_records(5)
    rec["sockid"], rec["timestamp"] = 1, np.arange(5) * 10**7 + 10**9
    rec["event"], rec["size"] = Event.SOCK_SEND, 1000
    rec["event"][2], rec["sockid"][2], rec["size"][2] = Event.LOST, 0, 7
    path = magnetlib.write(tmp_path / "lossy.magnet", rec)
    proc = run_magnet("replay", "ns3", path, "--stacks", "1", "--no-plots", "-o", tmp_path / "o",
                      check=True)
    assert "the capture lost 7 records" in proc.stderr_text
