"""Writing and reading traces: round trips in both byte orders, metadata, loss, clocks, bad input."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import magnetlib
from magnetlib import format as fmt
from magnetlib.format import Clock, Event
from magnetlib.meta import TraceMeta

from .conftest import FUZZ_EXAMPLES, both_versions

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

DATA_EVENTS = [ev for ev in Event if ev not in (Event.SYSINFO, Event.META)]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def record_arrays(draw, ext=None):
    ext = draw(st.booleans()) if ext is None else ext
    n = draw(st.integers(0, 40))
    rec = magnetlib.empty_records(n, ext=ext)
    rec["sockid"] = draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n))
    rec["timestamp"] = np.sort(draw(st.lists(st.integers(1, 2**62), min_size=n, max_size=n)))
    rec["event"] = draw(st.lists(st.sampled_from(DATA_EVENTS), min_size=n, max_size=n))
    rec["size"] = draw(st.lists(st.integers(-2**31, 2**31 - 1), min_size=n, max_size=n))
    if ext:
        for f in fmt.EXT_FIELDS:
            hi = 2 ** (8 * f.width) - 1
            shape = (n, f.count) if f.count > 1 else (n,)
            seed = draw(st.integers(0, 2**32 - 1))
            rec[f.name] = np.random.default_rng(seed).integers(0, hi, size=shape, endpoint=True)
    return rec


text = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=40)
metas = st.builds(
    TraceMeta,
    clock_khz=st.integers(1, 2**31 - 1),
    wall_anchor_ns=st.none() | st.integers(0, 2**63 - 1),
    clock_source=st.none() | st.sampled_from(list(Clock)),
    host_id=st.none() | st.integers(0, 2**64 - 1),
    hostname=st.none() | text,
    producer=st.none() | text,
    buffer_bytes=st.none() | st.integers(0, 2**40),
    event_mask=st.none() | st.integers(0, 2**63),
)


def write_read(path, rec, meta, order):
    magnetlib.write(path, rec, meta, byteorder=order)
    return magnetlib.open(path)


@SETTINGS
@given(rec=record_arrays(), meta=metas, order=st.sampled_from(["<", ">"]))
def test_round_trip(tmp_path, rec, meta, order):
    path = tmp_path / "t.magnet"
    trace = write_read(path, rec, meta, order)
    assert trace.byteorder == order
    assert len(trace.data) == len(rec)
    for name in rec.dtype.names:
        assert np.array_equal(trace.column(name)[trace.header_len:], rec[name]), name
    for field in ("clock_khz", "wall_anchor_ns", "clock_source", "host_id", "hostname",
                  "producer", "buffer_bytes", "event_mask"):
        assert getattr(trace.meta, field) == getattr(meta, field), field
    assert trace.meta.record_size == rec.dtype.itemsize
    assert os.stat(path).st_mode & 0o777 == 0o600


@SETTINGS
@given(rec=record_arrays(), meta=metas)
def test_big_and_little_endian_parse_identically(tmp_path, rec, meta):
    little = write_read(tmp_path / "le.magnet", rec, meta, "<")
    big = write_read(tmp_path / "be.magnet", rec, meta, ">")
    assert (tmp_path / "le.magnet").read_bytes() != (tmp_path / "be.magnet").read_bytes() or len(rec) == 0
    assert little.header_len == big.header_len
    for name in little.records.dtype.names:      # header text chunks are raw bytes: data only
        assert np.array_equal(little.column(name)[little.header_len:],
                              big.column(name)[big.header_len:]), name
    assert little.meta == big.meta
    assert little.scan.counts == big.scan.counts


@SETTINGS
@given(rec=record_arrays(ext=False), lost=st.lists(st.integers(1, 10**6), max_size=5))
def test_lost_totals(tmp_path, rec, lost):
    rec["size"] = np.where(rec["event"] == Event.LOST, np.abs(rec["size"].astype(np.int64)) // 2, rec["size"])
    extra = magnetlib.empty_records(len(lost))
    extra["event"] = Event.LOST
    extra["size"] = lost
    extra["timestamp"] = np.arange(1, len(lost) + 1) * 1000
    both = np.concatenate([extra, rec])
    both = both[np.argsort(both["timestamp"], kind="stable")]
    trace = write_read(tmp_path / "t.magnet", both, None, "<")
    expected = sum(lost) + int(rec["size"][rec["event"] == Event.LOST].sum())
    assert trace.scan.lost == expected
    ns, counts = trace.lost_series()
    assert counts.sum() == expected


def test_clock_change_is_honoured(tmp_path):
    """Ticks at 2 GHz, then at 1 GHz from tick 4000: ns continue piecewise."""
    rec = magnetlib.empty_records(4)
    rec["timestamp"] = [2000, 4000, 4000, 5000]
    rec["event"] = [Event.SOCK_SEND, Event.SOCK_SEND, Event.SYSINFO, Event.SOCK_SEND]
    rec["sockid"] = [1, 1, (1 << 32) | 24, 1]
    rec["size"] = [10, 10, 1_000_000, 10]
    trace = write_read(tmp_path / "c.magnet", rec, TraceMeta(clock_khz=2_000_000, anchor_ticks=1000), ">")
    trace.check()
    ns = trace.ns[trace.header_len:]
    # 1000 ticks at 2 GHz = 500 ns; SYSINFO at 4000 = 2000 ns; 1000 ticks at 1 GHz later = 1000 ns
    assert list(ns - trace.start_ns) == [500, 1500, 1500, 2500]
    assert trace.duration_ns == 2000


def test_datetimes_from_anchor(tmp_path):
    rec = magnetlib.empty_records(2)
    rec["timestamp"] = [5_000, 1_000_005_000]
    rec["event"] = Event.SOCK_SEND
    anchor = 1_700_000_000 * 10**9
    trace = write_read(tmp_path / "d.magnet", rec, TraceMeta(anchor_ticks=5_000, wall_anchor_ns=anchor), "<")
    dates = trace.datetimes()[trace.header_len:]
    assert dates[0] == np.datetime64(anchor, "ns")
    assert dates[1] - dates[0] == np.timedelta64(1, "s")


def test_truncated_final_record_keeps_whole_records(tmp_path):
    rec = magnetlib.empty_records(3)
    rec["timestamp"] = [1, 2, 3]
    rec["event"] = Event.SOCK_SEND
    path = tmp_path / "t.magnet"
    magnetlib.write(path, rec)
    with open(path, "ab") as f:
        f.write(b"\x01" * 17)
    trace = magnetlib.open(path).check()
    assert trace.truncated_bytes == 17
    assert len(trace.data) == 3


def test_reordering_within_tolerance_is_counted(tmp_path):
    rec = magnetlib.empty_records(3)
    rec["timestamp"] = [1_000_000, 999_000, 2_000_000]      # 1 us back: another CPU
    rec["event"] = Event.SOCK_SEND
    trace = write_read(tmp_path / "r.magnet", rec, None, "<").check()
    assert trace.scan.backsteps == 1
    assert trace.ticks_to_ns(trace.scan.max_backstep_ticks) == 1000


@pytest.mark.parametrize("mutate,problem", [
    (lambda b: b"", "empty file"),
    (lambda b: b[:10], "too short"),
    (lambda b: b"\0" * 48, "not a magnet trace"),
    (lambda b: b[:16] + b"\xde\xad\xbe\xef" + b[20:], "not a magnet trace"),
    (lambda b: (7 << 32 | 24).to_bytes(8, "little") + b[8:], "format version 7"),
    (lambda b: (1 << 32 | 99).to_bytes(8, "little") + b[8:], "impossible record size 99"),
    (lambda b: b[:20] + (0).to_bytes(4, "little") + b[24:], "impossible clock rate"),
])
def test_bad_headers(tmp_path, mutate, problem):
    rec = magnetlib.empty_records(2)
    rec["timestamp"] = [1, 2]
    rec["event"] = Event.SOCK_SEND
    good = tmp_path / "good.magnet"
    magnetlib.write(good, rec, byteorder="<", producer="x")
    bad = tmp_path / "bad.magnet"
    bad.write_bytes(mutate(good.read_bytes()))
    with pytest.raises(magnetlib.TraceError) as err:
        magnetlib.open(bad).check()
    assert problem in str(err.value) and str(bad) in str(err.value)


@pytest.mark.parametrize("field,value,problem", [
    ("event", 0x99, "unknown event code 0x00000099"),
    ("timestamp", 0, "timestamp is 0"),
])
def test_bad_records(tmp_path, field, value, problem):
    rec = magnetlib.empty_records(3)
    rec["timestamp"] = [1, 2, 3]
    rec["event"] = Event.SOCK_SEND
    rec[field][1] = value
    path = tmp_path / "b.magnet"
    magnetlib.TraceWriter.append  # writer refuses zero timestamps, so write raw records
    good = magnetlib.empty_records(3)
    good["timestamp"] = [1, 2, 3]
    good["event"] = Event.SOCK_SEND
    magnetlib.write(path, good)
    raw = bytearray(path.read_bytes())
    raw[-len(rec) * 24:] = rec.tobytes()
    path.write_bytes(bytes(raw))
    with pytest.raises(magnetlib.TraceError, match=problem):
        magnetlib.open(path).check()


def test_time_running_backwards(tmp_path):
    rec = magnetlib.empty_records(2)
    rec["timestamp"] = [10_000_000_000, 1_000]
    rec["event"] = Event.SOCK_SEND
    with pytest.raises(magnetlib.TraceError, match="non-monotonic timestamps"):
        write_read(tmp_path / "n.magnet", rec, None, "<").check()


def test_missing_file():
    with pytest.raises(magnetlib.TraceError, match="No such file"):
        magnetlib.open("/nonexistent/x.magnet")


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corruption_never_raises_anything_but_trace_error(tmp_path, data):
    """Random byte flips, cuts and splices: every reader path fails cleanly or works."""
    rec = data.draw(record_arrays())
    rec["event"] = np.where(rec["event"] == Event.LOST, Event.SOCK_SEND, rec["event"])
    path = tmp_path / "c.magnet"
    magnetlib.write(path, rec, producer="fuzz", hostname="h", byteorder=data.draw(st.sampled_from("<>")))
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        op = data.draw(st.sampled_from(["flip", "cut", "splice"]))
        if op == "flip" and raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        elif op == "cut":
            raw = raw[:data.draw(st.integers(0, len(raw)))]
        else:
            at = data.draw(st.integers(0, len(raw)))
            raw[at:at] = data.draw(st.binary(max_size=30))
    path.write_bytes(bytes(raw))
    try:
        trace = magnetlib.open(path).check()
        trace.streams()
        trace.to_pandas()
        magnetlib.metrics.modulation(trace)
        magnetlib.demand.extract(trace)
    except magnetlib.TraceError:
        pass


@st.composite
def raw_records(draw):
    """Records as a capture might leave them: any code (SYSINFO, unknown ones), error and
    zero sizes, zero timestamps, time stepping back."""
    n = draw(st.integers(1, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rec = magnetlib.empty_records(n)
    codes = np.array([*map(int, DATA_EVENTS), int(Event.SYSINFO), 0x99, 2**32 - 1], np.uint32)
    rec["event"] = rng.choice(codes, n)
    rec["size"] = rng.choice([0, -11, 1, 1448, 2**31 - 1, -2**31], n)
    ts = np.cumsum(rng.choice([-40, 0, 3, 500], n)) + 10_000     # ties in the largest step back
    rec["timestamp"] = np.where(rng.random(n) < 0.1, 0, ts)
    return rec


@SETTINGS
@given(rec=raw_records(), order=st.sampled_from(["<", ">"]), chunk=st.integers(1, 9),
       workers=st.integers(1, 3))
def test_scan_in_c_equals_numpy(tmp_path, monkeypatch, rec, order, chunk, workers):
    """The scan's C walk (scan.c) and its numpy passes find the same, chunks and ranges
    cutting anywhere."""
    from dataclasses import astuple

    from magnetlib import scan
    monkeypatch.setattr(scan, "CHUNK", chunk)
    monkeypatch.setattr(scan, "WORKERS", workers)
    path = tmp_path / "s.magnet"
    good = magnetlib.empty_records(len(rec))
    good["timestamp"], good["event"] = 1, Event.SOCK_SEND
    magnetlib.write(path, good, byteorder=order)
    raw = bytearray(path.read_bytes())
    raw[-len(rec) * 24:] = rec.astype(rec.dtype.newbyteorder(order)).tobytes()
    path.write_bytes(bytes(raw))
    scans = both_versions(lambda: magnetlib.open(path).scan, scan.c_loops() is not None)
    fields = [astuple(s) for s in scans]
    assert all(repr(f) == repr(fields[-1]) for f in fields)
    s = scans[-1]
    data = rec[rec["event"] < fmt.EVENT_TABLE_SIZE]
    for ev in s.counts:
        sizes = data["size"][data["event"] == ev]
        assert s.zero_size[ev] == np.count_nonzero(sizes == 0)
        assert s.errors[ev] == np.count_nonzero(sizes < 0)


@SETTINGS
@given(rec=raw_records(), order=st.sampled_from(["<", ">"]), size=st.integers(1, 70),
       events=st.lists(st.sampled_from(DATA_EVENTS), min_size=1, max_size=4), one=st.booleans())
def test_batches_in_c_equal_numpy(tmp_path, rec, order, size, events, one):
    """Trace.batches' columns from the C walk (scan.c) and from numpy: the same records,
    filtered by event (codes beyond the table included) and by stream."""
    rec = rec[rec["event"] != Event.SYSINFO]          # a clock in ns throughout: the C walk's case
    rec["sockid"] = np.random.default_rng(len(rec)).choice(np.array([1, 2**64 - 1], np.uint64), len(rec))
    path = tmp_path / "b.magnet"
    good = magnetlib.empty_records(len(rec))
    good["timestamp"], good["event"] = 1, Event.SOCK_SEND
    magnetlib.write(path, good, byteorder=order)
    raw = bytearray(path.read_bytes())
    raw[len(raw) - len(rec) * 24:] = rec.astype(rec.dtype.newbyteorder(order)).tobytes()
    path.write_bytes(bytes(raw))
    from magnetlib import scan

    def batches():
        trace = magnetlib.open(path)
        assert trace.exact_ns_clock
        got = trace.batches(events, 2**64 - 1 if one else None, size)
        return [(b.sockid, b.event, b.ns, b.size) for b in got]
    runs = both_versions(batches, scan.c_loops() is not None)
    for got in runs:
        assert len(got) == len(runs[-1])
        for batch, numpy_batch in zip(got, runs[-1]):
            for a, b in zip(batch, numpy_batch):
                assert a.dtype == b.dtype and np.array_equal(a, b)
    want = np.isin(rec["event"], events) & ((rec["sockid"] == 2**64 - 1) if one else True)
    assert np.array_equal(np.concatenate([ns for _, _, ns, _ in runs[-1]] or [np.zeros(0, np.int64)]),
                          rec["timestamp"][want].astype(np.int64))
