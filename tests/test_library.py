"""Trace libraries: import into Parquet, catalogue, idempotence, atomicity, DuckDB queries, CLI."""
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

import magnetlib
from magnetlib import metrics

from .conftest import BIN, assert_clean_error, require
from .librarygen import MIDNIGHT_NS, big_trace, make_trace

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


@pytest.fixture(autouse=True)
def _needs_library_packages():
    for name in ("pyarrow", "duckdb"):
        require(importlib.util.find_spec(name) is not None, f"{name} is not installed (pip install .[library])")


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("mglib-traces")
    return {
        # across midnight UTC, two streams, responses, loss
        "alpha": make_trace(d / "alpha.magnet", lost=[(0.5, 7), (2.2, 3)]),
        # extended records: pid, ports, addresses, TCP state
        "beta": make_trace(d / "beta.magnet", host="beta", wall_ns=MIDNIGHT_NS + 3_600 * 10**9, ext=True,
                           streams=((0x21, "ftp-paper"),), seed=3),
        # no wall-clock anchor, big-endian
        "gamma": make_trace(d / "gamma.magnet", host="gamma", wall_ns=None, byteorder=">",
                            streams=((0x31, "mp3"), (0x32, "ftp-slow")), seed=5),
    }


@pytest.fixture(scope="module")
def lib(traces, tmp_path_factory):
    from magnetlib.library import Library
    library = Library.create(tmp_path_factory.mktemp("mglib-lib") / "lib")
    added = library.add(traces.values(), application="ftp")
    assert [a.status for a in added] == ["added"] * 3
    return library


def trace_id(lib, name):
    return lib.query(f"SELECT trace FROM traces WHERE host = '{name}'")["trace"].item()


def test_layout_is_partitioned_by_host_and_real_dates(lib):
    root = lib.layout.events
    parts = sorted(str(p.relative_to(root)) for p in root.glob("host=*/day=*"))
    assert parts == ["host=alpha/day=2023-11-14", "host=alpha/day=2023-11-15",
                     "host=beta/day=2023-11-15", "host=gamma/day=unanchored"]
    days = lib.query("SELECT DISTINCT day, CAST(time AS DATE)::VARCHAR AS date FROM records "
                     "WHERE host = 'alpha' ORDER BY day")
    assert list(days["day"]) == list(days["date"]) == ["2023-11-14", "2023-11-15"]


@pytest.mark.parametrize("name", ["alpha", "beta", "gamma"])
def test_records_are_the_trace(lib, traces, name):
    trace = magnetlib.open(traces[name])
    want = trace.to_pandas()[["timestamp_ns", "sockid", "event", "size"]]
    want["event"] = want["event"].astype(str)
    got = lib.query(f"SELECT timestamp_ns, sockid, event, size, time FROM records "
                    f"WHERE trace = '{trace_id(lib, name)}'")
    keys = ["timestamp_ns", "sockid", "event", "size"]
    a = got[keys].sort_values(keys, kind="stable").reset_index(drop=True)
    b = want.sort_values(keys, kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    if trace.meta.wall_anchor_ns is None:
        assert got["time"].isna().all()
    else:
        utc = trace.datetimes(got["timestamp_ns"].to_numpy())
        assert (got["time"].dt.tz_convert(None).to_numpy() == utc).all()


@pytest.mark.parametrize("name", ["alpha", "beta", "gamma"])
def test_catalogue_agrees_with_the_trace(lib, traces, name):
    trace = magnetlib.open(traces[name])
    tid = trace_id(lib, name)
    want = trace.streams().reset_index()
    got = lib.query(f"SELECT * FROM streams WHERE trace = '{tid}' ORDER BY sockid")
    cols = [c for c in want.columns if c != "sockid"]
    pd.testing.assert_frame_equal(got[["sockid"] + cols], want[["sockid"] + cols], check_dtype=False)
    row = lib.query(f"SELECT * FROM traces WHERE trace = '{tid}'").iloc[0]
    s = trace.scan
    assert row["records"] == s.records and row["lost"] == s.lost and row["lost_records"] == s.lost_records
    assert row["streams"] == len(want) and row["application"] == "ftp"
    assert row["sha256"].startswith(tid) and row["source"] == os.path.abspath(traces[name])
    assert (row["start_time"] is pd.NaT) == (trace.meta.wall_anchor_ns is None)


def test_extended_fields(lib):
    beta = lib.query("SELECT * FROM streams WHERE host = 'beta'").iloc[0]
    assert (beta["pid"], beta["sport"], beta["dport"]) == (4000 + 0x21, 40000 + 0x21, 5001)
    assert (beta["saddr"], beta["daddr"], beta["mss"], beta["min_srtt_us"]) == ("10.0.0.1", "10.0.0.2", 1448, 200)
    assert (beta["max_snd_wnd"], beta["max_rcv_wnd"]) == (65536, 131072)
    # records of core and extended traces in one view: ext columns are null where a trace has none
    pids = lib.query("SELECT host, count(pid) AS n, max(pid) AS pid FROM records GROUP BY host ORDER BY host")
    assert list(pids["n"][:1]) == [0] and pids["pid"][1] == 4000 + 0x21
    assert lib.query("SELECT count(*) AS n FROM records WHERE daddr = '10.0.0.2'")["n"][0] > 0


def test_adding_again_changes_nothing(lib, traces, tmp_path):
    before = lib.query("SELECT trace, count(*) AS n FROM records GROUP BY trace ORDER BY trace")
    copy = tmp_path / "alpha-copy.magnet"
    shutil.copy(traces["alpha"], copy)
    again = lib.add([traces["alpha"], copy])
    assert [a.status for a in again] == ["present", "present"]
    after = lib.query("SELECT trace, count(*) AS n FROM records GROUP BY trace ORDER BY trace")
    pd.testing.assert_frame_equal(before, after)
    assert len(lib.traces()) == 3


@pytest.mark.parametrize("name", ["alpha", "beta", "gamma"])
def test_modulation_is_magnet_stats(lib, traces, name):
    want = metrics.modulation(magnetlib.open(traces[name]))
    got = lib.modulation()
    got = got[got["trace"] == trace_id(lib, name)].drop(columns=["host", "application", "trace"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False, rtol=1e-9)


def test_demand_stats(lib, traces):
    frame = lib.demand_stats()
    alpha = frame[frame["host"] == "alpha"].set_index("direction")
    trace = magnetlib.open(traces["alpha"])
    for direction in ("send", "recv"):
        d = magnetlib.demand.extract(trace, direction=direction)
        row = alpha.loc[direction]
        assert row["calls"] == len(d) and row["bytes"] == d.total_bytes
        assert row["streams"] == len(np.unique(d.sockid)) and row["application"] == "ftp"
        assert np.isclose(row["mean_size"], d.size.mean()) and np.isclose(row["std_size"], d.size.std())
        assert row["min_size"] == d.size.min() and row["max_size"] == d.size.max()
    send = magnetlib.demand.extract(trace, direction="send")
    spans = [np.ptp(send.time_ns[send.sockid == s] + 0) for s in np.unique(send.sockid)]
    gaps = len(send) - len(spans)
    assert np.isclose(alpha.loc["send", "mean_gap_s"], sum(spans) / 1e9 / gaps)


def test_loss_over_time(lib):
    loss = lib.loss(bin_s=1.0)
    alpha = loss[loss["host"] == "alpha"]
    lossy = alpha[alpha["lost"] > 0]
    start = MIDNIGHT_NS - 1_500_000_000         # the trace's wall-clock anchor, at its time zero
    assert list(lossy["lost"]) == [7, 3]
    assert list(lossy["bin_start_ns"]) == [(start + int(t * 1e9)) // 10**9 * 10**9 for t in (0.5, 2.2)]
    assert (alpha["timeline"] == "utc").all() and alpha["bin_start"].notna().all()
    assert alpha["recorded"].sum() + 0 == lib.query(
        "SELECT count(*) AS n FROM records WHERE host = 'alpha' AND event <> 'LOST'")["n"][0]
    gamma = loss[loss["host"] == "gamma"]
    assert (gamma["timeline"] == trace_id(lib, "gamma")).all() and gamma["bin_start"].isna().all()


def test_top_streams(lib):
    top = lib.top_streams(3)
    assert len(top) == 3 and list(top["bytes"]) == sorted(top["bytes"], reverse=True)
    everything = lib.streams()
    assert top["bytes"].iloc[0] == everything["bytes"].max()


# --------------------------------------------------------- interruptions ---
def test_interrupted_import_leaves_the_library_as_it_was(lib, tmp_path):
    work = tmp_path / "lib"
    shutil.copytree(lib.layout.root, work)
    from magnetlib.library import Library
    copy = Library(work)
    before_traces = copy.traces()
    before_counts = copy.query("SELECT trace, count(*) AS n FROM records GROUP BY trace ORDER BY trace")
    big = big_trace(tmp_path / "big.magnet", 6_000_000)
    proc = subprocess.Popen([str(BIN / "magnet"), "library", "add", str(big), "--library", str(work)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    staged = []
    deadline = time.monotonic() + 60
    while not staged and proc.poll() is None and time.monotonic() < deadline:
        staged = list((work / ".staging").rglob("*.parquet"))
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert staged, "the import ended before it could be interrupted midway"
    assert list((work / ".staging").rglob("*.parquet")), "the kill left nothing half-written: not midway"
    pd.testing.assert_frame_equal(Library(work).traces(), before_traces)
    pd.testing.assert_frame_equal(
        Library(work).query("SELECT trace, count(*) AS n FROM records GROUP BY trace ORDER BY trace"), before_counts)
    assert not list((work / "events").glob("host=big/*/*.parquet"))
    # the next import clears what was left and imports the trace whole
    done = Library(work).add([big])
    assert done[0].status == "added" and not list((work / ".staging").iterdir())
    n = Library(work).query(f"SELECT count(*) AS n FROM records WHERE trace = '{done[0].trace}'")["n"][0]
    assert n == 6_000_000


def test_a_kill_in_the_commit_window_leaves_no_file_of_an_unlisted_trace(traces, tmp_path):
    from magnetlib.library import Library
    libdir = tmp_path / "lib"
    Library.create(libdir).add([traces["alpha"]])
    # killed just after the commit of gamma's import moved its first day file
    script = ("import os, sys\nfrom magnetlib.library import Library\nrename = os.rename\n"
              "os.rename = lambda src, dst: (rename(src, dst), '/events/' in str(dst) and os._exit(9))\n"
              "Library(sys.argv[1]).add([sys.argv[2]])\n")
    proc = subprocess.run([sys.executable, "-c", script, str(libdir), str(traces["gamma"])])
    assert proc.returncode == 9

    def consistent(lib) -> set:
        """Every day file belongs to a listed trace; every listed trace reads whole."""
        listed = lib.query("SELECT trace, records FROM traces")
        in_tree = {p.name.split("-")[0] for p in (libdir / "events").glob("host=*/day=*/*.parquet")}
        assert in_tree <= set(listed["trace"])
        read = lib.query("SELECT trace, count(*) AS records FROM records GROUP BY trace")
        assert dict(zip(read["trace"], read["records"])) == dict(zip(listed["trace"], listed["records"]))
        return set(listed["trace"])

    assert len(consistent(Library(libdir))) == 2               # committed, its files still staged
    Library(libdir).add([traces["beta"]])                      # the next writer puts them in place
    assert len(consistent(Library(libdir))) == 3 and not list((libdir / ".staging").iterdir())
    private = [p for p in libdir.rglob("*.parquet") if p.stat().st_mode & 0o777 != 0o600]
    assert not private, "library files hold addresses and ports: mode 0600"


# ------------------------------------------------------------------- CLI ---
def test_cli_add_list_query(traces, tmp_path, magnet):
    libdir = tmp_path / "lib"
    proc = magnet("library", "add", traces["alpha"], traces["gamma"], "--library", libdir, "--app", "web",
                  check=True)
    assert proc.stderr_text.count("added as trace") == 2
    again = magnet("library", "add", traces["alpha"], "--library", libdir, check=True)
    assert "already in the library" in again.stderr_text
    listing = magnet("library", "list", libdir, check=True).stdout_text
    assert "alpha" in listing and "gamma" in listing and "web" in listing
    out = tmp_path / "q.csv"
    magnet("library", "query", libdir, "SELECT host, count(*) AS n FROM records GROUP BY host ORDER BY host",
           "-o", out, check=True)
    frame = pd.read_csv(out)
    assert list(frame["host"]) == ["alpha", "gamma"]
    assert frame["n"][0] == len(magnetlib.open(traces["alpha"]).data)
    for action in ("demand", "modulation", "top", "loss"):
        assert magnet("library", action, libdir, check=True).stdout_text.strip()


def test_cli_bad_input(traces, tmp_path, magnet):
    libdir = tmp_path / "lib"
    magnet("library", "add", traces["alpha"], "--library", libdir, check=True)
    assert_clean_error(magnet("library", "query", tmp_path / "nowhere", "SELECT 1"), "nowhere", "does not exist")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x").write_text("x")
    assert_clean_error(magnet("library", "list", tmp_path / "plain"), "not a magnet library")
    assert_clean_error(magnet("library", "query", libdir, "SELEC 1"), "query failed")
    assert_clean_error(magnet("library", "query", libdir, "SELECT nope FROM records"), "query failed")
    not_trace = tmp_path / "notes.txt"
    not_trace.write_text("hello, this is not a trace at all")
    assert_clean_error(magnet("library", "add", not_trace, "--library", libdir), "notes.txt", "not a magnet trace")
    corrupt = tmp_path / "corrupt.magnet"
    raw = bytearray(open(traces["gamma"], "rb").read())
    raw[-24 + 16:-24 + 20] = (0x77).to_bytes(4, "big")      # an unknown event code in the last record
    corrupt.write_bytes(bytes(raw))
    assert_clean_error(magnet("library", "add", corrupt, "--library", libdir), "corrupt.magnet", "unknown event")
    assert_clean_error(magnet("library", "loss", libdir, "--bin", "0"), "positive")
    assert_clean_error(magnet("library", "top", libdir, "-o", tmp_path / "x.xlsx"), "unknown output type")
    listed = magnet("library", "list", libdir, check=True).stdout_text
    assert "gamma" not in listed and not list((libdir / ".staging").iterdir())


def test_cli_truncated_trace_is_imported_and_reported(traces, tmp_path, magnet):
    cut = tmp_path / "cut.magnet"
    raw = open(traces["alpha"], "rb").read()
    cut.write_bytes(raw[:-10])
    proc = magnet("library", "add", cut, "--library", tmp_path / "lib")
    assert proc.returncode == 2 and "truncated final record (14 bytes)" in proc.stderr_text
    assert "Traceback" not in proc.stderr_text
    from magnetlib.library import Library
    n = Library(tmp_path / "lib").query("SELECT records, truncated_bytes FROM traces").iloc[0]
    assert (n["records"], n["truncated_bytes"]) == (len(magnetlib.open(traces["alpha"]).data) - 1, 14)


def test_an_empty_library_answers_with_no_rows(tmp_path):
    from magnetlib.library import Library
    empty = Library.create(tmp_path / "lib")
    assert empty.traces().empty and empty.streams().empty
    assert empty.query("SELECT count(*) AS n FROM records")["n"][0] == 0
    assert empty.demand_stats().empty and empty.modulation().empty and empty.loss().empty


def _create_at_once(path, barrier, results) -> None:
    from magnetlib.library import catalog
    barrier.wait()
    try:
        catalog.open_layout(path, create=True)
        results.put("ok")
    except Exception as e:              # what a creator saw, to be shown by the test
        results.put(f"{type(e).__name__}: {e}")


def test_creators_at_once_all_get_the_one_library(tmp_path):
    """Three processes creating the same new library at the same instant, 30 times: before,
    one was refused ("is not empty and not a magnet library") or tripped on another's
    magnet-library.json.tmp in 28 of 50 rounds."""
    import multiprocessing

    from magnetlib.library import catalog        # loaded once, before the forks
    assert catalog.MARKER
    ctx = multiprocessing.get_context("fork")
    seen = []
    for i in range(30):
        barrier, results = ctx.Barrier(3), ctx.Queue()
        path = tmp_path / f"lib{i}" if i % 2 else tmp_path / f"empty{i}"
        if i % 2 == 0:
            path.mkdir()                    # an empty directory is taken too
        procs = [ctx.Process(target=_create_at_once, args=(path, barrier, results)) for _ in range(3)]
        for p in procs:
            p.start()
        seen += [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join()
        assert sorted(q.name for q in path.iterdir()) == [".staging", "catalog", "events", "magnet-library.json"]
    assert seen == ["ok"] * len(seen), [s for s in seen if s != "ok"][:3]
    assert not list(tmp_path.glob(".*.new-*"))


def test_a_half_made_library_is_completed(traces, tmp_path):
    """What a creation stopped by a full disk left before (its directories, an empty
    magnet-library.json.tmp, no marker) was refused by every later add; it is completed."""
    from magnetlib.library import Library
    lib = tmp_path / "lib"
    for d in ("events", "catalog/streams", ".staging"):
        (lib / d).mkdir(parents=True)
    (lib / "magnet-library.json.tmp").write_text("")
    Library.create(lib).add([traces["alpha"]])
    assert sorted(p.name for p in lib.iterdir()) == [".lock", ".staging", "catalog", "events", "magnet-library.json"]
    assert len(Library(lib).traces()) == 1


def test_a_full_disk_while_creating_leaves_nothing_half_made(traces, tmp_path):
    """ENOSPC while the library is made (a tmpfs of 4 inodes, in a mount namespace of its
    own): one line, no directory left that a later add would refuse; with room, it works."""
    from .conftest import require_root, require_tool
    require_root()
    require_tool("unshare")
    disk = tmp_path / "disk"
    disk.mkdir()
    magnet = BIN / "magnet"
    script = (f"mount -t tmpfs -o size=1m,nr_inodes=4 none {disk} && "
              f"{magnet} library add --library {disk}/lib {traces['alpha']}; echo status=$?; "
              f"ls -A {disk}; mount -o remount,nr_inodes=1000 {disk} && "
              f"{magnet} library add --library {disk}/lib {traces['alpha']} >/dev/null 2>&1 && echo added")
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [f"magnet: {disk}/lib: cannot create the library: No space left on device"], proc.stderr
    assert proc.stdout.split() == ["status=2", "added"], proc.stdout
