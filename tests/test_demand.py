"""Demand extraction and demand files."""
import numpy as np
import pytest

import magnetlib
from magnetlib import demand, synth
from magnetlib.format import Event


def _trace(tmp_path):
    rec = magnetlib.empty_records(8)
    rec["sockid"] = [5, 5, 6, 5, 5, 5, 6, 5]
    rec["timestamp"] = np.arange(1, 9) * 1_000_000
    rec["event"] = [Event.SOCK_SEND, Event.TCP_SEND, Event.SOCK_SEND, Event.SOCK_SEND,
                    Event.SOCK_RECV, Event.SOCK_SEND, Event.SOCK_RECV, Event.SOCK_RECV]
    rec["size"] = [1000, 1000, 50, -11, 300, 0, 70, 0]
    path = tmp_path / "d.magnet"
    magnetlib.write(path, rec)
    return magnetlib.open(path)


def test_extract_one_stream_counts_errors_and_empty_calls(tmp_path):
    d = demand.extract(_trace(tmp_path), sockid=5)
    assert list(d.size) == [1000, 300]
    assert list(d.direction) == [demand.SEND, demand.RECV]
    assert list(d.time_ns) == [0, 4_000_000]
    assert d.errors == 1 and d.zero == 2
    assert list(demand.extract(_trace(tmp_path), sockid=5, direction="send").size) == [1000]


def test_lower_layer_series(tmp_path):
    d = demand.extract(_trace(tmp_path), sockid=5, direction="send", layer="tcp")
    assert list(d.size) == [1000]


@pytest.mark.parametrize("ext", [".csv", ".parquet", ".magnet"])
def test_demand_files_round_trip(tmp_path, ext):
    d = demand.extract(_trace(tmp_path))
    path = tmp_path / f"out{ext}"
    demand.write_demand(d, path)
    assert path.stat().st_mode & 0o777 == 0o600              # who talked when: private, as traces
    back = demand.read_demand(path)
    assert np.array_equal(back.time_ns, d.time_ns)
    assert np.array_equal(back.size, d.size)
    assert np.array_equal(back.direction, d.direction)
    assert np.array_equal(back.sockid, d.sockid)


def test_synthetic_demand_survives_a_file(tmp_path):
    d = synth.mp3(duration_s=5)
    demand.write_demand(d, tmp_path / "m.magnet")
    back = demand.read_demand(tmp_path / "m.magnet")
    assert np.array_equal(back.time_ns, d.time_ns) and np.array_equal(back.size, d.size)


@pytest.mark.parametrize("body,problem", [
    ("sockid,time_ns,direction,size\n", "empty demand"),
    ("sockid,time_ns,direction,size\n1,0,send,10\n1,5,send,-3\n", "row 1: size -3"),
    ("sockid,time_ns,direction,size\n1,10,send,10\n1,5,send,3\n", "times out of order"),
    ("sockid,time_ns,direction,size\n1,10,sideways,10\n", "direction must be send or recv"),
    ("a,b\n1,2\n", "not a demand file"),
    ("sockid,time_ns,direction,size\n1,0,send,10\n1,nan,send,3\n", "row 1: time_ns is empty or NaN"),
    ("sockid,time_ns,direction,size\n1,0,send,10\n1,,send,3\n", "row 1: time_ns is empty or NaN"),
    ("sockid,time_ns,direction,size\n1,0,send,10\n1,1e30,send,3\n", "row 1: time_ns 1e\\+30 is not a whole"),
    ("sockid,time_ns,direction,size\n1,0,send,10\n1,5,send,2.5\n", "row 1: size 2.5 is not a whole"),
    ("sockid,time_ns,direction,size\n1,0,send,10\n1,5,send,lots\n", "column size: Unable to parse"),
])
def test_bad_demand_files(tmp_path, body, problem):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(magnetlib.TraceError, match=problem):
        demand.read_demand(path)
    with pytest.raises(magnetlib.TraceError, match="unknown demand file type"):
        demand.read_demand(tmp_path / "x.txt")
