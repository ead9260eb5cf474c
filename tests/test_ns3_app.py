"""Every connection of a whole application replayed at once in ns-3, for real: the
semantics of docs/app-demand.md checked to the simulated nanosecond, duplex paths,
bad input and failed connections.  Skips without ns-3 or g++ (fails under CI)."""
from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

import magnetlib
from magnetlib import app_demand, app_metrics, synth
from magnetlib.knobs import Queue
from magnetlib.format import Event
from magnet.replay import ns3
from magnet.replay.scenario import Path as NetPath, Scenario, cross

from .conftest import assert_clean_error, ns3_programs, run_magnet

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

MS = 1_000_000
COLUMNS = "connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after"
# Five connections: three overlapping request/response ones, one opened after the
# third's last byte, one opened by the server (an FTP active-mode data connection).
ROWS = """\
1,open,client,0,0,-1,0,0,0
1,send,client,1000000,300,0,0,1000000,0
2,open,client,5000000,0,-1,0,0,0
2,send,client,6000000,500,0,0,1000000,0
3,open,client,7000000,0,-1,0,0,0
5,open,server,20000000,0,-1,0,0,0
5,send,server,21000000,50000,0,0,1000000,0
1,send,server,70000000,20000,1,300,5000000,0
2,send,server,80000000,100000,1,500,2000000,0
3,send,client,90000000,200,0,0,83000000,0
3,send,server,150000000,1000,1,200,0,0
1,send,client,200000000,400,2,20000,10000000,0
4,open,client,210000000,0,-1,0,4000000,3
4,send,client,211000000,100,0,0,0,0
4,send,server,240000000,100,1,100,0,0
1,send,server,260000000,5000,3,700,3000000,0
1,close,client,300000000,0,-1,25000,1000000,0
"""


@pytest.fixture(scope="session")
def programs():
    return ns3_programs()


@pytest.fixture(scope="module")
def demand_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("app") / "five.csv"
    path.write_text(COLUMNS + "\n" + ROWS)
    app_demand.read(path)                       # the table is valid for magnet's own reader too
    return path


PATH = NetPath(rate_bps=10_000_000, delay_ns=20 * MS, duplex=True)


@pytest.fixture(scope="module")
def closed(programs, demand_csv, tmp_path_factory):
    return ns3.run_app(demand_csv, tmp_path_factory.mktemp("closed"), Scenario(path=(PATH,)),
                       programs=programs)


def seconds(text) -> Decimal:
    """A time of connections.csv / adus.csv, exactly (they print simulated ns)."""
    return Decimal(str(text))


def adu(run, connection, number):
    rows = pd.read_csv(run.out_dir / "adus.csv", dtype=str)
    return rows[(rows.connection == str(connection)) & (rows.adu == str(number))].iloc[0]


def conn(run, connection):
    rows = pd.read_csv(run.out_dir / "connections.csv", dtype=str)
    return rows[rows.connection == str(connection)].iloc[0]


# ------------------------------------------------------------ semantics ---
def test_every_connection_completes_with_its_bytes(closed):
    conns = closed.connections
    assert list(conns.connection) == [1, 2, 3, 4, 5]
    assert (conns.status == "ok").all(), conns
    assert list(conns.opener) == ["client"] * 4 + ["server"]
    assert list(conns.bytes_sent) == [700, 500, 200, 100, 0]
    assert list(conns.bytes_received) == [25000, 100000, 1000, 100, 50000]
    assert list(conns.adus) == [4, 2, 2, 2, 1]
    assert (conns.completion_s > conns.start_s).all()
    assert closed.summary["failed"] == 0 and closed.summary["connections"] == 5


def test_start_offsets_are_exact(closed):
    for c, opens in ((1, "0"), (2, "0.005"), (3, "0.007"), (5, "0.020")):
        assert seconds(conn(closed, c).start_s) == Decimal(opens)


def test_a_send_waits_for_its_bytes_then_its_think_time(closed):
    # The server answers 5 ms after reading the client's 300-byte request ...
    assert seconds(adu(closed, 1, 1).start_s) == seconds(adu(closed, 1, 0).end_s) + Decimal("0.005")
    # ... the client's next request goes 10 ms after it read the 20000-byte answer ...
    assert seconds(adu(closed, 1, 2).start_s) == seconds(adu(closed, 1, 1).end_s) + Decimal("0.010")
    # ... and a first send with no wait thinks from the open (the handshake included).
    assert seconds(adu(closed, 3, 0).start_s) == Decimal("0.007") + Decimal("0.083")


def test_after_opens_think_time_after_the_earlier_connections_last_byte(closed):
    assert seconds(conn(closed, 4).start_s) == seconds(adu(closed, 3, 1).end_s) + Decimal("0.004")


def test_each_response_after_its_request(closed):
    adus = closed.adus
    answers = adus[adus.response_s.notna()]
    assert len(answers) == 6                      # connection 1: ADUs 1, 2, 3; 2, 3 and 4: ADU 1
    for row in answers.itertuples():
        request = adus[(adus.connection == row.connection) & (adus.adu == row.adu - 1)].iloc[0]
        assert row.start_s >= request.end_s       # written after the request was read
        assert row.response_s == pytest.approx(row.end_s - request.start_s, abs=1e-9)
        assert row.response_s > 2 * 0.020         # at least the path's round trip


def test_the_close_row_waits_and_the_connection_completes_after_it(closed):
    last = seconds(adu(closed, 1, 3).end_s)       # the client read the server's last 5000 bytes
    assert seconds(conn(closed, 1).completion_s) >= last + Decimal("0.001")


def test_open_loop_issues_every_event_at_its_time(programs, demand_csv, closed, tmp_path):
    run = ns3.run_app(demand_csv, tmp_path, Scenario(path=(PATH,)), open_loop=True, programs=programs)
    assert (run.connections.status == "ok").all()
    # Rows whose connection was established by then go out exactly at time_ns ...
    for c, number, at in ((1, 1, "0.070"), (2, 1, "0.080"), (1, 2, "0.200"), (1, 3, "0.260")):
        assert seconds(adu(run, c, number).start_s) == Decimal(at)
    # ... the after-connection at its original time, and so earlier than closed-loop.
    assert seconds(conn(run, 4).start_s) == Decimal("0.210")
    assert seconds(adu(closed, 1, 1).start_s) != Decimal("0.070")


def test_each_side_is_a_trace_like_a_real_capture(closed):
    for side, sent, received in (("client", 1500, 176100), ("server", 176100, 1500)):
        with magnetlib.open(closed.traces[side]) as trace:
            trace.check()
            assert trace.meta.hostname == side
            body = slice(trace.header_len, None)
            ev, size = trace.column("event")[body], trace.column("size")[body]
            assert set(np.unique(trace.column("sockid")[body])) <= {1, 2, 3, 4, 5}
            assert size[ev == Event.SOCK_SEND].sum() == size[ev == Event.DEV_SEND].sum() == sent
            assert size[ev == Event.SOCK_RECV].sum() == size[ev == Event.DEV_RECV].sum() == received


def test_three_overlapping_connections_from_the_demand_generator(programs, tmp_path):
    d = synth.app_requests(connections=3, duration_s=0.4, ramp_s=0.05, request_bytes=300,
                           response_bytes=20000, period_s=0.05, server_think_s=0.005, seed=3)
    csv = ns3.write_app_csv(d, tmp_path / "three.csv")
    run = ns3.run_app(csv, tmp_path / "out", Scenario(path=(PATH,)), programs=programs)
    conns = run.connections
    assert (conns.status == "ok").all()
    opens = d.time_ns[d.event == app_demand.OPEN]
    starts = [seconds(s) for s in pd.read_csv(run.out_dir / "connections.csv", dtype=str).start_s]
    assert starts == [Decimal(int(t)) / Decimal(10**9) for t in opens]
    assert (run.adus.response_s.dropna() > 0.040).all()


# ----------------------------------------------------------------- duplex ---
ONE_WAY = """\
1,open,client,0,0,-1,0,0,0
1,send,client,1000000,100,0,0,0,0
1,send,server,30000000,400000,1,100,0,0
"""


def test_duplex_gives_the_reverse_direction_its_own_link(programs, tmp_path):
    csv = tmp_path / "download.csv"
    csv.write_text(COLUMNS + "\n" + ONE_WAY)
    slow = NetPath(rate_bps=5_000_000, delay_ns=10 * MS)
    took = {}
    for duplex in (True, False):
        run = ns3.run_app(csv, tmp_path / str(duplex), Scenario(path=(replace(slow, duplex=duplex),)),
                          programs=programs)
        took[duplex] = float(adu(run, 1, 1).end_s) - float(adu(run, 1, 1).start_s)
        assert run.summary["config"]["paths"][0]["duplex"] is duplex
    assert took[True] > 400000 * 8 / 5e6          # the 400 kB answer crossed a 5 Mbit/s link ...
    assert took[False] < took[True] / 3            # ... not the fast reverse of a simplex path


def test_duplex_cross_traffic_runs_both_ways(programs, demand_csv, tmp_path):
    path = NetPath(rate_bps=10_000_000, delay_ns=20 * MS)
    drops = {}
    for duplex in (True, False):
        scenario = Scenario(path=(replace(path, duplex=duplex),), cross=(cross("tcp:2"),))
        run = ns3.run_app(demand_csv, tmp_path / str(duplex), scenario, programs=programs)
        assert (run.connections.status == "ok").all()
        assert run.summary["cross_bytes"] > 0 and run.summary["cross_ns"] > 10**9   # it ran first
        drops[duplex] = run.summary["bottleneck_reverse"]["queue_drops"]
        assert run.summary["bottleneck_forward"]["queue_drops"] > 0
    assert drops[True] > 0 and drops[False] == 0


def test_the_whole_application_replay_logs_both_directions_of_its_bottleneck(programs, tmp_path):
    """Ns3Options(link_log=True): stack-1.linklog and, on a duplex path, stack-1.reverse.linklog
    (linkem's forward and reverse logs); each side's data segments enter its direction's log
    at their DEV_SEND, and the 400 kB answer waits in the reverse queue after it."""
    csv = tmp_path / "download.csv"
    csv.write_text(COLUMNS + "\n" + ONE_WAY)
    scenario = Scenario(path=(NetPath(rate_bps=5_000_000, delay_ns=10 * MS, duplex=True),))
    run = ns3.run_app(csv, tmp_path / "out", scenario, ns3.Ns3Options(link_log=True), programs=programs)
    from magnet.replay import linklog
    for side, log in (("client", "stack-1.linklog"), ("server", "stack-1.reverse.linklog")):
        with magnetlib.open(run.traces[side]) as trace:
            pos = trace.select([Event.DEV_SEND])
            sent = trace.ns_at(pos)[trace.column_at("size", pos) > 0]
        records = linklog.read_file(run.out_dir / log)
        entered = np.asarray(records["arrival_ns"])
        assert len(sent) and np.isin(sent, entered).all(), side
    waits = np.asarray(linklog.read_file(run.out_dir / "stack-1.reverse.linklog")["wait_ns"])
    assert waits.max() > 50 * MS                   # the answer queued behind its own window


def test_chain_args_carry_duplex_and_a_simplex_chain_is_unchanged():
    assert "--duplex=0,1" in ns3.chain_args(Scenario(stacks=2, path=(NetPath(), NetPath(duplex=True))))
    assert "--duplex=0" in ns3.chain_args(Scenario(stacks=1))


# ------------------------------------------------------------------ scale ---
def test_each_segment_finds_its_connection_in_one_lookup(programs, demand_csv, tmp_path):
    """ns-3's own TCP finds a segment's socket by walking every endpoint of the node:
    O(connections) a segment, a whole application's replay O(connections^2).  The
    replay hands each segment to its connection from a table instead (MagnetTcpDemux):
    every segment but each connection's SYN to the acceptor, the table learning a
    connection at most once per end; and the simulation is the same, byte for byte."""
    many = synth.app_requests(connections=40, duration_s=1.0, ramp_s=0.2, seed=5)
    for name, csv in (("five", demand_csv), ("forty", ns3.write_app_csv(many, tmp_path / "forty.csv"))):
        outs = {}
        for hashed in (0, 1):
            outs[hashed] = tmp_path / f"{name}-{hashed}"
            outs[hashed].mkdir()
            args = ns3.chain_args(Scenario(stacks=1, path=(PATH,)))
            subprocess.run([str(programs.chain), f"--app={csv}", f"--out={outs[hashed]}",
                            f"--hashedDemux={hashed}", *args], capture_output=True, check=True)
        for result in ("connections.csv", "adus.csv", "client.magnet", "server.magnet"):
            assert (outs[0] / result).read_bytes() == (outs[1] / result).read_bytes(), (name, result)
        summary = json.loads((outs[1] / "summary.json").read_text())
        n, demux = summary["connections"], summary["demux"]
        segments = demux["hits"] + demux["passed"]
        assert summary["failed"] == 0 and segments > 10 * n, summary
        assert demux["passed"] == n and 0 < demux["rebuilds"] <= 2 * n, (name, demux)


# -------------------------------------------------------------- bad input ---
@pytest.mark.parametrize("rows,problem", [
    ("1,send,client,0,10,0,0,0,0\n", "row 1 (connection 1): send before the connection's open"),
    ("1,open,client,0,0,-1,0,0,0\n1,send,client,5,10,0,0,-3,0\n", "row 2 (connection 1): negative think"),
    ("1,open,client,0,0,-1,0,0,0\n1,send,client,5,10,0,50,0,0\n",
     "row 2 (connection 1): wait_bytes 50 is more than the server ever sends"),
    ("1,open,client,0,0,-1,0,0,0\n1,send,nobody,5,10,0,0,0,0\n", "row 2 (connection 1): unknown side 'nobody'"),
    ("1,open,client,0,0,-1,0,0,0\n2,open,client,0,0,-1,0,0,7\n", "row 2 (connection 2): after 7"),
    ("", "no connection"),
])
def test_bad_input_is_one_line_naming_file_row_and_connection(programs, tmp_path, rows, problem):
    bad = tmp_path / "bad.csv"
    bad.write_text(COLUMNS + "\n" + rows)
    proc = subprocess.run([str(programs.chain), f"--app={bad}", f"--out={tmp_path}"],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"magnet-chain: {bad}: "), lines
    assert problem in lines[0], lines
    # magnet's own reader refuses it first, in the same form
    cli = run_magnet("replay", "ns3", bad, "-o", tmp_path / "o")
    assert_clean_error(cli, str(bad))
    assert "row" in cli.stderr_text or "no connection" in cli.stderr_text


def test_a_failed_connection_is_reported_and_fails_the_run(programs, demand_csv, tmp_path):
    # Packets lost in bursts of 10000 each way: SYNs and data lost, connections stall or fail
    # (seed 2's draws, linkem's: its first bursts lose SYNs, and one connection stalls).
    proc = run_magnet("replay", "ns3", demand_csv, "--loss", "ge:50%/0.01%", "--seed", "2", "--no-plots",
                      "-o", tmp_path)
    assert proc.returncode == 1, proc.stderr_text
    err = [line for line in proc.stderr_text.splitlines() if line.strip()]
    assert len(err) == 1 and "5 of 5 connections failed (connection 1: " in err[0], err
    conns = pd.read_csv(tmp_path / "connections.csv")
    assert (conns.status != "ok").all() and "connect failed" in set(conns.status), conns
    assert "incomplete" in set(conns.status)       # stalled: stopped when nothing moved for 120 s


def test_cli_replays_a_whole_application(programs, demand_csv, tmp_path):
    proc = run_magnet("replay", "ns3", demand_csv, "--rate", "10Mbps", "--delay", "20ms", "--no-plots",
                      "-o", tmp_path, check=True)
    text = proc.stdout_text
    assert "whole-application replay, 5 connections (1 opened by the server)" in text, text
    assert "bottleneck each way (duplex)" in text, text
    assert "client -> server:" in text and "server -> client:" in text, text
    assert "5 of 5 connections complete" in text, text
    for name in ("connections.csv", "adus.csv", "client.magnet", "server.magnet", "summary.json",
                 "table.csv", "table-response.csv", "demand.csv"):
        assert (tmp_path / name).stat().st_size > 0, name
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["open_loop"] is False and summary["config"]["paths"][0]["duplex"] is True
    off = run_magnet("replay", "ns3", demand_csv, "--duplex", "off", "--no-plots", "-o", tmp_path / "off",
                     check=True)
    assert "(data direction; 10Gbps back)" in off.stdout_text
    assert_clean_error(run_magnet("replay", "ns3", demand_csv, "--sweep", "rate=1Mbps,2Mbps", "-o", tmp_path),
                       "--sweep", "whole-application")
    assert_clean_error(run_magnet("replay", "ns3", "synth:ftp", "--open-loop", "-o", tmp_path),
                       "--open-loop")


def test_cli_tcp_model_reaches_ns3(programs, demand_csv, tmp_path):
    """`--tcp-model` is what ns-3 runs, for a whole application and for a chain (Linux's by default)."""
    for demand, extra in ((demand_csv, []), ("synth:ftp", ["--duration", "1"])):
        for model in ("linux", "ns3"):
            flags = [] if model == "linux" else ["--tcp-model", model]
            proc = run_magnet("replay", "ns3", demand, *extra, *flags, "--no-plots", "-o", tmp_path / model,
                              check=True)
            assert f"Model={model} " in proc.stdout_text, proc.stdout_text


def test_reader_wakeup_is_an_ns3_option_of_the_linux_model():
    """Ns3Options.reader_wakeup_ns reaches magnet-chain as --readerWakeup (0 by default: an
    ideal host); ns-3's own TcpSocketBase reads at once, so the ns3 model refuses it."""
    assert "--readerWakeup=0ns" in ns3.chain_args(Scenario(stacks=1))
    assert "--readerWakeup=25000ns" in ns3.chain_args(Scenario(stacks=1), ns3.Ns3Options(reader_wakeup_ns=25_000))
    for bad in ({"reader_wakeup_ns": -1}, {"reader_wakeup_ns": 25_000, "tcp_model": "ns3"}):
        with pytest.raises(ValueError, match="with the linux TCP model"):
            ns3.Ns3Options(**bad)


def test_cli_reader_wakeup_reaches_ns3(programs, demand_csv, tmp_path):
    """`--reader-wakeup` is the wake-up ns-3's Linux profile applies, for a whole application and
    for a chain (0 by default); with `--tcp-model ns3` it is refused in one line."""
    for demand, extra in ((demand_csv, []), ("synth:ftp", ["--duration", "1"])):
        for flags, shown in (([], "ReaderWakeup=0s"), (["--reader-wakeup", "25us"], "ReaderWakeup=25us")):
            proc = run_magnet("replay", "ns3", demand, *extra, *flags, "--no-plots", "-o", tmp_path / shown,
                              check=True)
            assert shown in proc.stdout_text, proc.stdout_text
        assert_clean_error(run_magnet("replay", "ns3", demand, *extra, "--tcp-model", "ns3", "--reader-wakeup",
                                      "25us", "-o", tmp_path / "bad"), "with the linux TCP model")


def test_host_lags_are_ns3_options_of_the_linux_model():
    """Ns3Options.ack_lag_ns and reply_lag_ns reach magnet-chain as --ackLag and --replyLag (0 by
    default: an ideal host); ns-3's own TcpSocketBase takes every segment at once, so the ns3
    model refuses them."""
    args = ns3.chain_args(Scenario(stacks=1))
    assert "--ackLag=0ns" in args and "--replyLag=0ns" in args
    args = ns3.chain_args(Scenario(stacks=1), ns3.Ns3Options(ack_lag_ns=9_500, reply_lag_ns=5_000))
    assert "--ackLag=9500ns" in args and "--replyLag=5000ns" in args
    for bad in ({"ack_lag_ns": -1}, {"reply_lag_ns": -1}, {"ack_lag_ns": 1, "tcp_model": "ns3"},
                {"reply_lag_ns": 1, "tcp_model": "ns3"}):
        with pytest.raises(ValueError, match="with the linux TCP model"):
            ns3.Ns3Options(**bad)


def test_cli_host_lags_reach_ns3(programs, demand_csv, tmp_path):
    """`--ack-lag` and `--reply-lag` are the lags ns-3's Linux profile applies, for a whole
    application and for a chain (0 by default); with `--tcp-model ns3` refused in one line."""
    for demand, extra in ((demand_csv, []), ("synth:ftp", ["--duration", "1"])):
        for flags, shown in (([], ("AckLag=0s", "ReplyLag=0s")),
                             (["--ack-lag", "9us", "--reply-lag", "5us"], ("AckLag=9us", "ReplyLag=5us"))):
            proc = run_magnet("replay", "ns3", demand, *extra, *flags, "--no-plots", "-o", tmp_path / shown[0],
                              check=True)
            assert all(s in proc.stdout_text for s in shown), proc.stdout_text
        assert_clean_error(run_magnet("replay", "ns3", demand, *extra, "--tcp-model", "ns3", "--ack-lag",
                                      "9us", "-o", tmp_path / "bad"), "with the linux TCP model")


# ------------------------------------------------ where a side's wire is seen ---
# A 1 MB download fills the reverse bottleneck's 20-packet queue (and overflows it in slow
# start) while the server writes 50 bytes every 100 ms on a second, idle connection.
LOADED = """\
1,open,client,0,0,-1,0,0,0
2,open,client,0,0,-1,0,0,0
1,send,client,1000000,100,0,0,1000000,0
1,send,server,2000000,1000000,1,100,0,0
""" + "".join(f"2,send,server,{200 + 100 * k}000000,50,0,0,{200 if k == 0 else 100}000000,0\n" for k in range(10))


def test_dev_send_is_when_the_device_takes_a_segment_before_the_bottleneck_queue(programs, tmp_path):
    """As Linux's capture sees it on the TUN device in front of linkem: a segment dropped at
    the bottleneck's queue was sent (and so counts as retransmitted bytes once resent), and a
    small write on an idle connection leaves its host at once, however long it then queues."""
    csv = tmp_path / "loaded.csv"
    csv.write_text(COLUMNS + "\n" + LOADED)
    app_demand.read(csv)
    path = NetPath(rate_bps=5_000_000, delay_ns=20 * MS, queue=Queue(20, "packets"), duplex=True)
    run = ns3.run_app(csv, tmp_path / "out", Scenario(path=(path,)), programs=programs)
    assert (run.connections.status == "ok").all()
    drops = run.summary["bottleneck_reverse"]["queue_drops"]
    assert drops > 0 and run.summary["bottleneck_reverse"]["loss_drops"] == 0
    server, client = run.summary["server"], run.summary["client"]
    assert server["dev_send"] == client["dev_recv"] + drops          # every dropped copy left the host
    profile = app_metrics.profile(run.traces["client"], run.traces["server"])
    assert app_metrics.totals(profile)["retrans"] >= drops * 1448
    stamps = {}
    for side in ("server", "client"):
        with magnetlib.open(run.traces[side]) as trace:
            pos = trace.select([Event.SOCK_SEND, Event.DEV_SEND, Event.DEV_RECV], sockid=2)
            ev, ns = trace.column_at("event", pos), trace.ns_at(pos)
            stamps[side] = {e: ns[ev == e] for e in (Event.SOCK_SEND, Event.DEV_SEND, Event.DEV_RECV)}
    wrote, left = stamps["server"][Event.SOCK_SEND], stamps["server"][Event.DEV_SEND]
    arrived = stamps["client"][Event.DEV_RECV]
    assert len(wrote) == len(left) == len(arrived) == 10
    assert (left - wrote < MS).all()                                 # out of the host at the write ...
    assert (arrived - wrote).max() > 20 * MS + 20 * MS               # ... then queued behind the download
