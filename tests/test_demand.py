"""Demand extraction and demand files."""
import numpy as np
import pytest

import magnetlib
from magnetlib import demand, synth
from magnetlib.format import Event

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


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


@pytest.mark.parametrize("columns,problem", [
    ({"time_ns": [0, None, 20], "size": [100, 200, 300]}, "row 1: time_ns is empty or NaN"),
    ({"time_ns": [0, 10, 20], "size": [100, None, 300]}, "row 1: size is empty or NaN"),
    ({"sockid": [1, -1, 1], "time_ns": [0, 10, 20], "size": [1, 2, 3]}, "row 1: sockid -1 is not a whole number"),
])
def test_nullable_parquet_columns(tmp_path, columns, problem):
    """Parquet's nullable Int64 with a null (pandas reads it as Int64, not float): before,
    "internal error: ValueError: cannot convert to 'int64'"; a negative stream id was
    wrapped to 0xffffffffffffffff."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = tmp_path / "nullable.parquet"
    pd.DataFrame({k: pd.array(v, dtype="Int64") for k, v in columns.items()}).to_parquet(path)
    with pytest.raises(magnetlib.TraceError, match=problem):
        demand.read_demand(path)


@pytest.mark.parametrize("replayer", [["tcp", "--loopback"], ["ns3"]])
def test_replayers_name_the_input_of_a_bad_demand(tmp_path, replayer):
    """Both replayers: one line naming the input file, status 2 (before: an internal error
    for the Parquet null; the output's demand.magnet named for a 3 GB write, in tcp)."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from .conftest import assert_clean_error, run_magnet
    null = tmp_path / "null.parquet"
    pd.DataFrame({"time_ns": pd.array([0, None], dtype="Int64"), "size": pd.array([1, 2], dtype="Int64")}).to_parquet(null)
    assert_clean_error(run_magnet("replay", *replayer, null, "-o", tmp_path / "a"),
                       f"{null}: row 1: time_ns is empty or NaN")
    big = tmp_path / "big.csv"
    big.write_text("time_ns,size\n0,100\n10,3000000000\n")
    assert_clean_error(run_magnet("replay", *replayer, big, "-o", tmp_path / "b"),
                       f"{big}: write 2 is 3000000000 bytes")
