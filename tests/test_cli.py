"""The magnet command: output of each subcommand, and clean failures on bad input."""
import re

import numpy as np
import pytest

import magnetlib
from magnetlib.format import Event

from .conftest import BIN, assert_clean_error

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


@pytest.fixture
def ftp(tmp_path, magnet):
    path = tmp_path / "ftp.magnet"
    magnet("synth", "ftp", "--duration", "5", "-o", path, check=True)
    return path


def test_info(ftp, magnet):
    out = magnet("info", ftp, check=True).stdout_text
    assert "version 1, 24-byte records" in out
    assert "SYNTHETIC" in out and "streams     1" in out
    assert "SOCK_SEND" in out and "DEV_SEND" in out


def test_info_shows_no_bytes_for_scheduler_events(tmp_path, magnet):
    """A scheduler event's size is the CPU it ran on (docs/trace-format.md), not bytes."""
    rec = magnetlib.empty_records(3)
    rec["timestamp"] = [10, 20, 30]
    rec["event"] = [Event.SOCK_SEND, Event.SCHED_SWITCH, Event.SCHED_ENTER]
    rec["sockid"], rec["size"] = [7, (1 << 32) | 2, 2], [1000, 3, 0]
    magnetlib.write(tmp_path / "s.magnet", rec)
    rows = {line.split()[0]: line.split()[1:] for line in
            magnet("info", tmp_path / "s.magnet", check=True).stdout_text.splitlines()[-3:]}
    assert rows["SOCK_SEND"] == ["1", "1000", "0", "0"]
    assert rows["SCHED_SWITCH"] == ["1", "-", "-", "-"] and rows["SCHED_ENTER"] == ["1", "-", "-", "-"]


@pytest.mark.parametrize("last_sockid, early", [(1, True), (0, False)])
def test_info_and_stats_say_when_a_capture_ended_early(tmp_path, magnet, last_sockid, early):
    """A last LOST record of sockid 1 marks a capture that stopped early (docs/trace-format.md)."""
    rec = magnetlib.empty_records(3)
    rec["timestamp"], rec["event"] = [10, 20, 30], [Event.SOCK_SEND, Event.SOCK_SEND, Event.LOST]
    rec["sockid"], rec["size"] = [7, 7, last_sockid], [1000, 500, 4]
    magnetlib.write(tmp_path / "s.magnet", rec)
    info = magnet("info", tmp_path / "s.magnet", check=True).stdout_text
    stats = magnet("stats", tmp_path / "s.magnet", check=True).stdout_text
    assert ("ended early" in info) is early and ("ended early" in stats) is early
    assert re.search(r"^lost\s+4 records", info, re.M)


def test_parse_is_tab_delimited_with_header(ftp, magnet):
    lines = magnet("parse", ftp, check=True).stdout_text.splitlines()
    assert lines[0].split("\t") == ["timestamp_ns", "sockid", "event", "size"]
    trace = magnetlib.open(ftp)
    assert len(lines) == 1 + len(trace.data)
    assert lines[1].split("\t")[2] == "SOCK_SEND"
    only = magnet("parse", ftp, "--events", "SOCK_SEND", check=True).stdout_text.splitlines()
    assert len(only) == 1 + trace.scan.counts[Event.SOCK_SEND]


def test_magnet_parse_alias(ftp):
    import subprocess
    out = subprocess.run([str(BIN / "magnet-parse"), str(ftp)], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("timestamp_ns\tsockid\tevent\tsize\n")


def test_parse_extended_fields(tmp_path, magnet):
    rec = magnetlib.empty_records(1, ext=True)
    rec["timestamp"], rec["event"], rec["size"] = 5, Event.DEV_SEND, 1448
    rec["sport"], rec["dport"], rec["snd_cwnd"] = 40000, 5001, 10
    rec["saddr"][0] = list(bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 1]))
    magnetlib.write(tmp_path / "e.magnet", rec, byteorder=">")
    lines = magnet("parse", tmp_path / "e.magnet", check=True).stdout_text.splitlines()
    row = dict(zip(lines[0].split("\t"), lines[1].split("\t")))
    assert row["sport"] == "40000" and row["snd_cwnd"] == "10" and row["saddr"] == "10.0.0.1"


def test_stats_and_demand(ftp, tmp_path, magnet):
    out = magnet("stats", ftp, check=True).stdout_text
    assert "sock" in out and "dev" in out and "10240" in out
    proc = magnet("demand", ftp, "-o", tmp_path / "d.csv", check=True)
    assert "250 events" in proc.stderr_text
    assert (tmp_path / "d.csv").read_text().startswith("sockid,time_ns,direction,size\n")


def test_big_endian_synth_reads_the_same(tmp_path, magnet):
    magnet("synth", "mp3", "--duration", "3", "--byteorder", "big", "-o", tmp_path / "be.magnet", check=True)
    magnet("synth", "mp3", "--duration", "3", "--byteorder", "little", "-o", tmp_path / "le.magnet", check=True)
    be = magnet("parse", tmp_path / "be.magnet", check=True).stdout_text
    assert be == magnet("parse", tmp_path / "le.magnet", check=True).stdout_text


def test_missing_and_empty_and_foreign_files(tmp_path, magnet):
    assert_clean_error(magnet("info", tmp_path / "nope.magnet"), "nope.magnet", "No such file")
    (tmp_path / "empty.magnet").write_bytes(b"")
    assert_clean_error(magnet("stats", tmp_path / "empty.magnet"), "empty.magnet", "empty file")
    (tmp_path / "foreign.magnet").write_bytes(b"GIF89a" + bytes(100))
    assert_clean_error(magnet("parse", tmp_path / "foreign.magnet"), "not a magnet trace")


def test_unknown_events_and_backwards_time(tmp_path, magnet):
    path = tmp_path / "u.magnet"
    rec = magnetlib.empty_records(2)
    rec["timestamp"], rec["event"] = [1, 2], Event.SOCK_SEND
    magnetlib.write(path, rec)
    raw = bytearray(path.read_bytes())
    raw[-8:-4] = (0x77).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    assert_clean_error(magnet("info", path), "unknown event code 0x00000077")
    rec["timestamp"] = [5_000_000_000, 1]
    magnetlib.write(path, rec)
    assert_clean_error(magnet("stats", path), "non-monotonic timestamps")


def test_truncated_trace_reports_and_still_works(ftp, magnet):
    with open(ftp, "ab") as f:
        f.write(b"\0" * 5)
    proc = magnet("info", ftp)
    assert proc.returncode == 2
    assert "truncated final record (5 bytes)" in proc.stderr_text
    assert "SOCK_SEND" in proc.stdout_text and "Traceback" not in proc.stderr_text


def test_impossible_metadata(tmp_path, magnet):
    path = tmp_path / "m.magnet"
    rec = magnetlib.empty_records(1)
    rec["timestamp"], rec["event"] = [1], Event.SOCK_SEND
    magnetlib.write(path, rec, producer="p")
    raw = bytearray(path.read_bytes())
    # the END record is the second-to-last record here: make it count wrongly
    end = len(raw) - 48
    raw[end:end + 8] = (99).to_bytes(8, "little")
    path.write_bytes(bytes(raw))
    assert_clean_error(magnet("info", path), "impossible metadata")


def test_demand_of_missing_stream(ftp, tmp_path, magnet):
    assert_clean_error(magnet("demand", ftp, "--stream", "77", "-o", tmp_path / "x.csv"), "stream 0x4d")
    assert not (tmp_path / "x.csv").exists()


def test_print_table_aligns_columns(capsys):
    from magnetlib.cli.common import print_table
    print_table({"stream": ["0x1", "0x10"], "bytes": np.array([5, 123456]),
                 "gap s": np.array([0.5, np.nan])})
    assert capsys.readouterr().out.splitlines() == [
        "stream   bytes  gap s",
        "   0x1       5    0.5",
        "  0x10  123456    NaN"]
    print_table({"stream": []})
    assert capsys.readouterr().out == "(no rows)\n"


def test_print_frame_writes_dates_as_pandas_does_and_missing_as_nan(capsys):
    import pandas as pd
    from magnetlib.cli.common import print_frame
    print_frame(pd.DataFrame({"start": pd.to_datetime([0, 1_500_000_000], unit="ns", utc=True),
                              "n": pd.array([1, None], "Int64")}))
    assert capsys.readouterr().out.splitlines() == [
        "                        start    n",
        "1970-01-01 00:00:00.000+00:00    1",
        "1970-01-01 00:00:01.500+00:00  NaN"]
