"""Modulation metrics: vectorised group statistics checked against a per-group oracle."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import magnetlib
from magnetlib import metrics, synth
from magnetlib.accumulate import c_loops
from magnetlib.format import Event

from .conftest import both_versions

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(-1000, 10**6)), max_size=200))
def test_group_stats_match_numpy(pairs):
    group = np.array([g for g, _ in pairs], np.int64)
    values = np.array([v for _, v in pairs], np.float64)
    out = metrics.group_stats(group, values, 5)
    for g in range(5):
        v = values[group == g]
        assert out["count"][g] == len(v)
        if len(v) == 0:
            assert np.isnan(out["mean"][g]) and np.isnan(out["p50"][g])
            continue
        assert np.isclose(out["mean"][g], v.mean())
        assert np.isclose(out["std"][g], v.std())
        assert out["min"][g] == v.min() and out["max"][g] == v.max()
        for q in metrics.QUANTILES:
            assert np.isclose(out[f"p{q * 100:g}"][g], np.quantile(v, q)), q


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10**9), st.integers(1, 10**5)),
                min_size=1, max_size=100))
def test_series_table_matches_pandas(rows):
    frame = pd.DataFrame(rows, columns=["g", "ns", "size"])
    table = metrics.series_table(frame["g"].to_numpy(), frame["ns"].to_numpy(), frame["size"].to_numpy(), 4)
    for g, part in frame.groupby("g"):
        part = part.sort_values("ns", kind="stable")
        row = table.iloc[g]
        assert row["events"] == len(part) and row["bytes"] == part["size"].sum()
        assert np.isclose(row["mean_size"], part["size"].mean())
        gaps = np.diff(part["ns"].to_numpy()) / 1e9
        if len(gaps):
            assert np.isclose(row["mean_spacing_s"], gaps.mean())
            assert np.isclose(row["p50_spacing_s"], np.median(gaps))
        else:
            assert np.isnan(row["mean_spacing_s"])
        span = (part["ns"].max() - part["ns"].min()) / 1e9
        if span > 0:
            assert np.isclose(row["throughput_bps"], part["size"].sum() * 8 / span)


def one_sort_modulation(trace, data_only=True):
    """The modulation table computed the simple way: every record in memory, one sort."""
    pos = trace.select(sorted(magnetlib.format.NETWORK_EVENTS))
    ns, size = trace.series(pos)
    event, sid = trace.column_at("event", pos), trace.column_at("sockid", pos)
    keep = ((size > 0) if data_only else np.ones(len(size), bool)) & (sid != 0)
    ns, size, event, sid = ns[keep], size[keep], event[keep], sid[keep]
    streams, sidx = np.unique(sid, return_inverse=True)
    row = np.array([metrics.LAYER_ROWS.index(magnetlib.format.NETWORK_EVENTS[e]) for e in event], np.int64)
    group = sidx.reshape(-1) * len(metrics.LAYER_ROWS) + row
    table = metrics.series_table(group, ns, size, len(streams) * len(metrics.LAYER_ROWS))
    table.insert(0, "sockid", np.repeat(streams, len(metrics.LAYER_ROWS)))
    table.insert(1, "layer", [layer for _ in streams for layer, _ in metrics.LAYER_ROWS])
    table.insert(2, "direction", [d for _ in streams for _, d in metrics.LAYER_ROWS])
    ngroups = len(streams) * len(metrics.LAYER_ROWS)
    table.insert(4, "retrans", np.bincount(group[event == Event.TCP_RETRANS], minlength=ngroups))
    return table[table["events"] > 0].reset_index(drop=True)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([1 << 20, 97, 1000]), st.sampled_from([1 << 23, 4000]),
       st.booleans())
def test_streaming_modulation_equals_one_sort(tmp_path_factory, seed, batch, cells, swapped):
    """Small batches, records out of time order, many streams, too few histogram cells for
    one pass: the streamed table is the one-sort table (quantiles exactly)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 4000))
    rec = magnetlib.empty_records(n)
    rec["timestamp"] = 10**9 + np.sort(rng.integers(0, 10**8, n)) + rng.integers(0, 10**6, n) * rng.integers(0, 2)
    rec["event"] = rng.choice(sorted(magnetlib.format.NETWORK_EVENTS), n)
    rec["sockid"] = rng.integers(0, int(rng.integers(1, 40)), n)
    rec["size"] = np.where(rng.random(n) < 0.5, rng.integers(-5, 70000, n), rng.choice([0, 1448, 65536, 2**31 - 1], n))
    path = tmp_path_factory.mktemp("s") / "s.magnet"
    magnetlib.write(path, rec, byteorder=">" if swapped else "=")
    trace = magnetlib.open(path)
    want = one_sort_modulation(trace)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(magnetlib.trace, "CHUNK_RECORDS", batch)
        patch.setattr(metrics, "RANK_CELLS", cells)
        tables = both_versions(lambda: metrics.modulation(trace), c_loops() is not None)
    got = tables[0]
    pd.testing.assert_frame_equal(got, want, check_dtype=False, rtol=1e-9)
    quantiles = [c for c in want.columns if c.startswith("p")]
    pd.testing.assert_frame_equal(got[quantiles], want[quantiles], check_exact=True)
    pd.testing.assert_frame_equal(tables[0], tables[-1], check_exact=True)     # C and numpy: same bits


def test_modulation_of_synthetic_ftp(tmp_path):
    path = synth.write_synthetic(str(tmp_path / "ftp.magnet"), "ftp", duration_s=10, mss=1448, rate_bps=100e6)
    table = metrics.modulation(magnetlib.open(path))
    sock = table[table["layer"] == "sock"].iloc[0]
    dev = table[table["layer"] == "dev"].iloc[0]
    assert sock["mean_size"] == 10240 and np.isclose(sock["mean_spacing_s"], 0.02)
    assert dev["bytes"] == sock["bytes"]
    # 10240 = 7 * 1448 + 104: the wire carries 8 segments per write
    assert dev["events"] == 8 * sock["events"]
    assert np.isclose(dev["mean_size"], 1280)
    assert dev["mean_spacing_s"] < sock["mean_spacing_s"]


def test_modulation_leaves_out_empty_events_and_counts_retransmissions(tmp_path):
    rec = magnetlib.empty_records(5)
    rec["sockid"] = 9
    rec["timestamp"] = [10, 20, 30, 40, 50]
    rec["event"] = [Event.TCP_SEND, Event.TCP_SEND, Event.TCP_RETRANS, Event.TCP_SEND, Event.SOCK_RECV]
    rec["size"] = [100, 0, 100, 100, 0]
    magnetlib.write(tmp_path / "r.magnet", rec)
    table = metrics.modulation(magnetlib.open(tmp_path / "r.magnet"))
    assert list(table["layer"]) == ["tcp"]
    assert table["events"][0] == 3 and table["retrans"][0] == 1
    everything = metrics.modulation(magnetlib.open(tmp_path / "r.magnet"), data_only=False)
    assert list(everything["layer"]) == ["tcp", "sock"]


def test_all_events_counts_errors_apart_from_bytes(tmp_path, magnet):
    """A negative size is the error the call returned (docs/trace-format.md), not bytes."""
    rec = magnetlib.empty_records(3)
    rec["sockid"], rec["timestamp"], rec["event"] = 9, [10, 20, 30], Event.SOCK_SEND
    rec["size"] = [1000, -11, 500]
    magnetlib.write(tmp_path / "e.magnet", rec)
    row = metrics.modulation(magnetlib.open(tmp_path / "e.magnet"), data_only=False).iloc[0]
    assert (row["events"], row["errors"], row["bytes"]) == (3, 1, 1500)
    assert row["mean_size"] == 750 and row["p50_size"] == 750
    assert np.isclose(row["mean_spacing_s"], 10e-9)           # failed calls still take their time
    out = magnet("stats", str(tmp_path / "e.magnet"), "--all-events", check=True).stdout.decode()
    header, line = out.splitlines()[:2]
    assert header.split()[4:6] == ["errors", "bytes"] and line.split()[4:6] == ["1", "1500"]


def test_stack_table_bandwidth_relative_to_application():
    ns = np.arange(0, 11) * 100_000_000
    table = metrics.stack_table([("Application", ns, np.full(11, 1000)),
                                 ("1st TCP stack", ns, np.full(11, 250))])
    assert list(table["stack"]) == ["Application", "1st TCP stack"]
    assert np.isclose(table["bandwidth_vs_app_pct"][1], -75.0)
    assert [metrics.ordinal_label(k) for k in range(5)] == [
        "Application", "1st TCP stack", "2nd TCP stack", "3rd TCP stack", "4th TCP stack"]
    assert metrics.ordinal_label(11) == "11th TCP stack"
