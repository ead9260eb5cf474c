"""The whole-application demand: its table and files, and how it is built from traces."""
from __future__ import annotations

import ipaddress

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import magnetlib
from magnetlib import app_demand, connections
from magnetlib.app_demand import CLIENT, CLOSE, OPEN, SEND, SERVER
from magnetlib.format import Event, ExtValid

from .conftest import FUZZ_EXAMPLES, run_magnet

MS = 1_000_000
T0 = 5_000_000_000                  # the traces' clock at the application's first open
SYN, ACK, FIN = 0x02, 0x10, 0x01


# ------------------------------------------------------ synthetic captures ---
class TracePair:
    """Records of a client's and a server's trace, as `magnet path --capture --ext` makes them:
    socket calls and device segments with addresses, TCP flags and the process."""

    def __init__(self):
        self.rows = {CLIENT: [], SERVER: []}

    def add(self, side, sockid, event, ns, size=0, flags=0, local=None, remote=None, pid=100):
        self.rows[side].append((sockid, T0 + ns, event, size, flags, local, remote, pid))

    def connection(self, k, open_ns, sends, close=(None, None), opener=CLIENT, pid=100, delay=MS // 2):
        """Connection k: a handshake at open_ns, then each (side, ns, size) send read by the
        peer `delay` later; close = each side's FIN time (None: none)."""
        ends = {CLIENT: ("10.0.0.1", 40000 + k), SERVER: ("10.0.0.2", 80)}
        ids = {CLIENT: 100 + k, SERVER: 200 + k}

        def add(side, event, ns, size=0, flags=0):
            mine, peer = ends[side], ends[1 - side]
            recv = event in (Event.SOCK_RECV, Event.DEV_RECV)
            self.add(side, ids[side], event, ns, size, flags, peer if recv else mine,
                     mine if recv else peer, pid if side == opener else pid + 1)
        add(opener, Event.DEV_SEND, open_ns, flags=SYN)
        add(1 - opener, Event.DEV_SEND, open_ns + delay, flags=SYN | ACK)
        for side, ns, size in sends:
            add(side, Event.SOCK_SEND, ns, size)
            add(1 - side, Event.SOCK_RECV, ns + delay, size)
        for side, ns in zip((CLIENT, SERVER), close):
            if ns is not None:
                add(side, Event.DEV_SEND, ns, flags=FIN | ACK)
                add(1 - side, Event.DEV_RECV, ns + delay, flags=FIN | ACK)

    def write(self, directory, sides=(CLIENT, SERVER)) -> list[str]:
        paths = []
        for side in sides:
            rows = sorted(self.rows[side], key=lambda r: r[1])
            rec = magnetlib.empty_records(len(rows), ext=True)
            for i, (sid, ts, ev, size, flags, local, remote, pid) in enumerate(rows):
                rec[i]["sockid"], rec[i]["timestamp"], rec[i]["event"], rec[i]["size"] = sid, ts, ev, size
                rec[i]["valid"] = ExtValid.ADDR | ExtValid.TASK | (ExtValid.SEGMENT if flags else 0)
                rec[i]["tcp_flags"], rec[i]["pid"], rec[i]["ip_version"] = flags, pid, 4
                rec[i]["saddr"], rec[i]["daddr"] = mapped(local[0]), mapped(remote[0])
                rec[i]["sport"], rec[i]["dport"] = local[1], remote[1]
            path = directory / f"T.{('client', 'server')[side]}.magnet"
            magnetlib.write(path, rec, anchor_ticks=T0 - MS)
            paths.append(str(path))
        return paths


def mapped(address: str) -> np.ndarray:
    """An IPv4 address as the records hold it: ::ffff:a.b.c.d, network order."""
    return np.frombuffer(ipaddress.IPv6Address(f"::ffff:{address}").packed, np.uint8)


def rows(d, connection, side=None, event=None):
    keep = d.connection == connection
    if side is not None:
        keep &= d.side == side
    if event is not None:
        keep &= d.event == event
    return d.part(keep)


# ---------------------------------------------------------------- building ---
def request_response(tmp_path):
    cap = TracePair()
    # a 300-byte request at 1 ms, the server's 2000-byte answer after 5 ms of its own thinking,
    # the client closing 10 ms after reading it, the server after the client's FIN
    cap.connection(1, 0, [(CLIENT, 1 * MS, 300), (SERVER, 6_500_000, 2000)], close=(17 * MS, 18_200_000))
    return cap


def test_each_side_from_its_own_records(tmp_path):
    d = connections.build(request_response(tmp_path).write(tmp_path))
    assert list(app_demand.EVENTS[e] for e in d.event) == ["open", "send", "send", "close", "close"]
    assert list(d.side) == [CLIENT, CLIENT, SERVER, CLIENT, SERVER]
    assert list(d.time_ns) == [0, 1 * MS, 6_500_000, 17 * MS, 18_200_000]
    assert list(d.wait_bytes) == [0, 0, 300, 2000, 300]
    # the server thought 5 ms (from reading the request at 1.5 ms), not the client's 5.5 ms
    assert list(d.think_ns) == [0, 1 * MS, 5 * MS, 10 * MS, 11_700_000]
    assert list(d.adu) == [-1, 0, 1, -1, -1]
    app_demand.validate(d, "built")


def test_one_side_infers_the_peer(tmp_path):
    paths = request_response(tmp_path).write(tmp_path)
    d = connections.build(paths[:1])                    # the client's capture alone
    server = rows(d, 1, SERVER, SEND)
    # the server is taken to have written the answer when the client read it: its think
    # time includes the original path's round trip (6 ms from the request's write)
    assert list(server.time_ns) == [7 * MS] and list(server.think_ns) == [6 * MS]
    assert list(server.wait_bytes) == [300]
    closes = rows(d, 1, event=CLOSE)
    assert list(closes.side) == [CLIENT, SERVER] and list(closes.time_ns) == [17 * MS, 18_700_000]
    only_server = connections.build(paths[1:])          # the server's alone: it accepted
    assert list(rows(only_server, 1, event=OPEN).side) == [CLIENT]
    assert list(rows(only_server, 1, SERVER, SEND).think_ns) == [5 * MS]


def test_sequential_connections_keep_their_dependency(tmp_path):
    cap = TracePair()
    cap.connection(1, 0, [(CLIENT, 1 * MS, 100), (SERVER, 3 * MS, 5000)], close=(4 * MS, 5 * MS))
    # opened 2 ms after the client read connection 1's last byte (3.5 ms) and closed it (4 ms)
    cap.connection(2, 5_500_000, [(CLIENT, 6 * MS, 100), (SERVER, 8 * MS, 5000)], close=(20 * MS, 21 * MS))
    # opened 2 s after anything finished (2 is still open): on its own clock, keeps its offset
    cap.connection(3, 2000 * MS, [(CLIENT, 2001 * MS, 100)], close=(2002 * MS, 2003 * MS))
    # another process, right after 3 closed: no dependency on another process's connection
    cap.connection(4, 2002_500_000, [(CLIENT, 2003 * MS, 100)], close=(2004 * MS, 2005 * MS), pid=300)
    d = connections.build(cap.write(tmp_path))
    opens = d.part(d.event == OPEN)
    assert list(opens.connection) == [1, 2, 3, 4]
    assert list(opens.after) == [0, 1, 0, 0]
    assert list(opens.think_ns) == [0, 2 * MS, 0, 0]
    assert list(connections.build(cap.write(tmp_path), after_within_ns=MS).after[d.event == OPEN]) == [0] * 4


def test_server_opened_connection(tmp_path):
    """An FTP active-mode data connection: the server connects to the client."""
    cap = TracePair()
    cap.connection(1, 0, [(CLIENT, 1 * MS, 10)])
    cap.connection(2, 3 * MS, [(SERVER, 4 * MS, 70000)], opener=SERVER, close=(None, 5 * MS))
    d = connections.build(cap.write(tmp_path))
    assert list(d.side[d.event == OPEN]) == [CLIENT, SERVER]
    assert list(rows(d, 2, event=CLOSE).side) == [SERVER]


def test_bytes_counted_once_per_side(tmp_path):
    cap = request_response(tmp_path)
    d = connections.build(cap.write(tmp_path))
    assert d.sent_bytes(CLIENT) == 300 and d.sent_bytes(SERVER) == 2000


@st.composite
def applications(draw):
    """Connections of random request/response exchanges (side, gap, size), some overlapping."""
    conns = []
    for k in range(1, draw(st.integers(1, 5)) + 1):
        t = draw(st.integers(0, 50)) * MS
        open_ns, sends = t, []
        for _ in range(draw(st.integers(0, 8))):
            t += draw(st.integers(1, 20)) * 100_000
            sends.append((draw(st.sampled_from([CLIENT, SERVER])), t, draw(st.integers(1, 100_000))))
        closing = draw(st.booleans())
        conns.append((k, open_ns, sends, (t + MS, t + 2 * MS) if closing else (None, None)))
    return conns


def _capture(conns) -> TracePair:
    cap = TracePair()
    for k, open_ns, sends, close in conns:
        cap.connection(k, open_ns, sends, close)
    return cap


@settings(max_examples=max(30, FUZZ_EXAMPLES // 10), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conns=applications(), one_sided=st.booleans())
def test_builder_properties(tmp_path, conns, one_sided):
    """Bytes per connection and side preserved; wait_bytes never decreasing; think times
    never negative; a table every reader accepts, the same after a .magnet round trip."""
    paths = _capture(conns).write(tmp_path)
    d = connections.build(paths[:1] if one_sided else paths)
    app_demand.validate(d, "built")
    assert len(d.connections) == len(conns)
    by_open = sorted(conns, key=lambda c: c[1])
    for number, (k, open_ns, sends, close) in enumerate(by_open, start=1):
        for side in (CLIENT, SERVER):
            mine = rows(d, number, side, SEND)
            assert int(mine.size.sum()) == sum(size for s, _, size in sends if s == side)
            waits = d.wait_bytes[(d.connection == number) & (d.side == side) & (d.event != OPEN)]
            assert (np.diff(waits) >= 0).all()
    assert (d.think_ns >= 0).all()
    app_demand.write(d, tmp_path / "d.magnet")
    back = app_demand.read(tmp_path / "d.magnet")
    for name in app_demand.COLUMNS:
        assert np.array_equal(getattr(back, name), getattr(d, name)), name


# ------------------------------------------------------------------ files ---
@pytest.mark.parametrize("ext", ["csv", "parquet", "magnet"])
def test_files_round_trip(tmp_path, ext):
    d = connections.build(request_response(tmp_path).write(tmp_path))
    path = tmp_path / f"d.{ext}"
    app_demand.write(d, path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert app_demand.is_app_demand(path)
    back = app_demand.read(path)
    for name in app_demand.COLUMNS:
        assert np.array_equal(getattr(back, name), getattr(d, name)), name


def test_magnet_form_byte_swapped(tmp_path):
    d = connections.build(request_response(tmp_path).write(tmp_path))
    app_demand.write(d, tmp_path / "d.magnet")
    trace = magnetlib.open(tmp_path / "d.magnet")
    other = ">" if np.little_endian else "<"
    magnetlib.write(tmp_path / "swapped.magnet", np.asarray(trace.data), trace.meta, byteorder=other)
    back = app_demand.read(tmp_path / "swapped.magnet")
    assert np.array_equal(back.think_ns, d.think_ns) and np.array_equal(back.wait_bytes, d.wait_bytes)


@pytest.mark.cpu                 # nothing real-time: `make test` runs it beside others
def test_every_command_reads_the_magnet_form(tmp_path):
    d = connections.build(request_response(tmp_path).write(tmp_path))
    path = tmp_path / "d.magnet"
    app_demand.write(d, path)
    for args in (["info"], ["parse"], ["stats"], ["demand", "--stream", "1", "-o", tmp_path / "c1.csv"]):
        proc = run_magnet(args[0], path, *args[1:])
        assert proc.returncode == 0, (args, proc.stderr_text)
    assert "DEMAND" in run_magnet("info", path).stdout_text
    one = magnetlib.demand.read_demand(tmp_path / "c1.csv")     # connection 1 as a stream
    assert list(one.size) == [300, 2000]


@pytest.mark.cpu                 # nothing real-time: `make test` runs it beside others
def test_cli_builds_from_a_path_capture(tmp_path):
    request_response(tmp_path).write(tmp_path)
    for given in ([tmp_path / "T"], [tmp_path / "T.client.magnet", tmp_path / "T.server.magnet"]):
        proc = run_magnet("demand", *given, "--all", "-o", tmp_path / "D.parquet")
        assert proc.returncode == 0, proc.stderr_text
        assert "1 connections" in proc.stderr_text
        assert len(app_demand.read(tmp_path / "D.parquet")) == 5
    proc = run_magnet("demand", tmp_path / "T.client.magnet", "--all", "--stream", "1", "-o", tmp_path / "x.csv")
    assert proc.returncode == 2 and "--stream: not with --all" in proc.stderr_text


HEADER = "connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after\n"
OPEN_1 = "1,open,client,0,0,-1,0,0,0\n"


@pytest.mark.parametrize("body,problem", [
    ("", "no connection"),
    ("1,send,client,0,10,0,0,0,0\n", r"row 1 \(connection 1\): send before the connection's open"),
    (OPEN_1 + "1,send,client,5,10,0,0,-3,0\n", r"row 2 \(connection 1\): negative think time -3 ns"),
    (OPEN_1 + "1,send,sideways,5,10,0,0,0,0\n", r"row 2 \(connection 1\): unknown side 'sideways'"),
    (OPEN_1 + "1,jump,client,5,0,-1,0,0,0\n", r"row 2 \(connection 1\): unknown event 'jump'"),
    (OPEN_1 + "1,send,server,5,10,0,20,0,0\n", r"row 2 \(connection 1\): waits for 20 bytes of the client's"),
    (OPEN_1 + "1,open,client,5,0,-1,0,0,0\n", r"row 2 \(connection 1\): a second open"),
    (OPEN_1 + "2,open,client,5,0,-1,0,0,3\n", r"row 2 \(connection 2\): opens after connection 3"),
    (OPEN_1 + "1,send,client,5,0,0,0,0,0\n", r"row 2 \(connection 1\): send of 0 bytes"),
    ("1,open,client,9,0,-1,0,0,0\n1,send,client,5,3,0,0,0,0\n", "rows out of time order"),
    (OPEN_1 + "1,send,client,5,2.5,0,0,0,0\n", r"row 2: size '2.5' is not a whole number"),
    (OPEN_1 + "1,send,client,5,10,0,0,,0\n", r"row 2: think_ns 'nan' is not a whole number"),
    (OPEN_1 + "1,send,server,5,10,0,0,0,0\n1,send,client,6,10,1,10,0,0\n1,send,client,7,10,1,5,0,0\n",
     r"row 4 \(connection 1\): wait_bytes smaller"),
    (OPEN_1 + "1,close,client,5,0,-1,0,0,0\n1,send,client,6,10,0,0,0,0\n", r"row 3 \(connection 1\): send after the client's close"),
])
def test_bad_tables_refused_in_one_line(tmp_path, body, problem):
    path = tmp_path / "d.csv"
    path.write_text(HEADER + body)
    with pytest.raises(magnetlib.TraceError, match=problem):
        app_demand.read(path)


def test_not_a_demand_file(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("connection,event\n1,open\n")
    with pytest.raises(magnetlib.TraceError, match="no column side"):
        app_demand.read(path)
    with pytest.raises(magnetlib.TraceError, match="unknown demand file type"):
        app_demand.read(tmp_path / "d.txt")


def test_real_capture_with_both_ends_in_one_trace(tmp_path):
    """The BPF capture of a local client and server (tests/app_three.py on 127.0.0.1): each
    connection's two sockets paired by 4-tuple in the one trace, the client opening each."""
    from .conftest import REPO, require, require_root
    require_root()
    from magnet.replay import wire
    why = wire.bpf_unavailable()
    require(why is None, f"BPF capture unavailable: {why}")
    import sys
    trace = tmp_path / "lo.magnet"
    cap = run_magnet("capture", "-x", "-o", trace, "--", sys.executable, REPO / "tests" / "app_three.py")
    assert cap.returncode == 0, cap.stderr_text
    d = connections.build([str(trace)])
    assert not d.notes, d.notes                               # nothing inferred, nothing paired by bytes
    assert len(d.connections) == 4 and list(d.side[d.event == OPEN]) == [CLIENT] * 4
    assert list(d.after[d.event == OPEN]) == [0, 0, 0, 3]
    for number in (1, 2, 3):
        assert list(rows(d, number, SERVER, SEND).size) == [20000] * 3
        assert list(rows(d, number, SERVER, SEND).wait_bytes) == [300, 600, 900]
        assert list(rows(d, number, event=CLOSE).side) == [CLIENT, SERVER]
    assert (d.think_ns[(d.event == SEND) & (d.side == SERVER)] >= 5 * MS).all()


def test_peeked_reads_are_not_reads(tmp_path):
    """vsftpd reads each command with MSG_PEEK, then reads it: the capture sees two reads, the
    socket's copied_seq moves once; the demand's waits count the bytes once."""
    cap = TracePair()
    cap.connection(1, 0, [(SERVER, 800_000, 20), (CLIENT, 1 * MS, 16), (SERVER, 3 * MS, 23)], close=(5 * MS, 6 * MS))
    ends = {CLIENT: ("10.0.0.1", 40001), SERVER: ("10.0.0.2", 80)}
    cap.add(SERVER, 201, Event.SOCK_RECV, 1 * MS + 400_000, 16, local=ends[SERVER], remote=ends[CLIENT], pid=101)
    client, server = cap.write(tmp_path)
    with magnetlib.open(server) as t:
        rec, meta = t.records.copy(), t.meta
    reads = np.flatnonzero(rec["event"] == Event.SOCK_RECV)
    assert len(reads) == 2                          # the peek at 1.4 ms, the read at 1.5 ms (after the greeting)
    sock = np.isin(rec["event"], [Event.SOCK_SEND, Event.SOCK_RECV])
    rec["valid"][sock] |= np.uint8(ExtValid.TCP_STATE)
    rec["copied_seq"][sock] = 1000
    rec["copied_seq"][reads[1]:] = np.where(sock[reads[1]:], 1016, 0)
    magnetlib.write(server, rec, meta)
    d = connections.build([client, server])
    assert list(rows(d, 1, SERVER, SEND).wait_bytes) == [0, 16]
    assert any("MSG_PEEK" in note for note in d.notes)
    assert not any("waited for more bytes" in note for note in d.notes)
