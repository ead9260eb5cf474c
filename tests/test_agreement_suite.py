"""The agreement study's suite part (--suite): ns-3 against Linux per application and path,
from a fidelity study's kept runs.  The work directory here is built from traces of the
form both replayers write (tests/test_app_demand.TracePair), with times chosen so that
every number is known; tests/test_study_fidelity.py runs it on a real fidelity run."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from magnet.experiments import agreement, agreement_suite
from magnetlib import app_metrics
from magnetlib.app_demand import CLIENT, SERVER
from magnetlib.format import Event

from .test_app_demand import MS, TracePair

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

APP = "http-python"
ENDS = {CLIENT: ("10.0.0.1", 40000), SERVER: ("10.0.0.2", 80)}


def replay(delay: int, resent: int = 0) -> TracePair:
    """Two connections, each a 300 B request at 1 ms answered with 3000 B at 6 ms; every
    segment leaves its sender's device as written and reaches the peer's `delay` later, so
    an exchange's round trip is 2 x delay; `resent` segments of each answer sent twice."""
    cap = TracePair()
    for k in (1, 2):
        start = 10 * MS * k
        sends = [(CLIENT, start + 1 * MS, 300), (SERVER, start + 6 * MS, 3000)]
        cap.connection(k, start, sends, delay=delay)
        ids = {CLIENT: 100 + k, SERVER: 200 + k}
        ends = {side: (ENDS[side][0], ENDS[side][1] + (k if side == CLIENT else 0)) for side in ENDS}
        for side, ns, size in sends:
            segments = [1448] * (size // 1448) + [size % 1448]
            again = segments[:resent] if side == SERVER else []
            for j, seg in enumerate(segments + again):
                cap.add(side, ids[side], Event.DEV_SEND, ns + j, seg, local=ends[side], remote=ends[1 - side],
                        pid=100 + side)
            for j, seg in enumerate(segments):        # records hold the segment's source and destination
                cap.add(1 - side, ids[1 - side], Event.DEV_RECV, ns + delay + j, seg, local=ends[side],
                        remote=ends[1 - side], pid=101 - side)
    return cap


def kept(directory, cap: TracePair, prefix: str = "") -> None:
    directory.mkdir(parents=True)
    for side, path in zip(("client", "server"), cap.write(directory)):
        (directory / path.rsplit("/", 1)[1]).rename(directory / f"{prefix}{side}.magnet")


@pytest.fixture
def work(tmp_path):
    """A fidelity work directory: on 60ms-10M two truth runs and both replays (ns-3's answers
    0.1 ms slower each way); on 200ms-2M a failed ns-3 replay."""
    w = tmp_path / "work"
    rows = [(APP, "A", "source", 1, "ok")]
    for run, delay in ((1, MS // 2), (2, 11 * MS // 20)):
        kept(w / APP / "60ms-10M" / f"truth-{run}", replay(delay), "t.")
        rows.append((APP, "60ms-10M", "truth", run, "ok"))
    kept(w / APP / "60ms-10M" / "demand-tcp", replay(MS // 2, resent=1))
    kept(w / APP / "60ms-10M" / "demand-ns3", replay(6 * MS // 10))
    kept(w / APP / "200ms-2M" / "demand-tcp", replay(MS // 2))
    rows += [(APP, "60ms-10M", "demand-tcp", 1, "ok"), (APP, "60ms-10M", "demand-ns3", 1, "ok"),
             (APP, "200ms-2M", "demand-tcp", 1, "ok"),
             (APP, "200ms-2M", "demand-ns3", 1, "magnet replay ns3 failed: 1 of 1 connections failed")]
    frame = pd.DataFrame(rows, columns=["app", "path", "kind", "run", "status"])
    frame["seconds"], frame["work"] = 1.0, ""
    frame.to_csv(w / "runs.csv", index=False)
    return w


def test_round_trips_and_retransmissions_from_data_segments(work):
    p = app_metrics.profile(str(work / APP / "60ms-10M" / "demand-tcp" / "client.magnet"),
                            str(work / APP / "60ms-10M" / "demand-tcp" / "server.magnet"))
    assert p.round_trips_s.tolist() == pytest.approx([1e-3, 1e-3])          # 2 x 0.5 ms, the server's 4.5 ms left out
    assert p.retrans_bytes("s2c") == 2 * 1448 and p.retrans_bytes("c2s") == 0
    t = app_metrics.totals(p)
    assert t["RTT"] == pytest.approx(1.0) and t["retrans"] == 2 * 1448 and t["connections"] == 2
    assert t["size"] == pytest.approx(3300 / 4)                  # 300, 1448, 1448, 104 per connection
    assert t["completion"] == pytest.approx(5.5e-3)


def test_suite_cells_compare_the_engines_and_show_a_failed_run(work, tmp_path):
    out = tmp_path / "out"
    assert agreement.main(["--suite", str(work), "--out", str(out)]) == 0
    table = pd.read_csv(out / "suite" / "suite.csv", keep_default_na=False, na_values=[""])
    ok, failed = table.iloc[0], table.iloc[1]
    assert (ok.path, ok.status, failed.path) == ("60ms-10M", "ok", "200ms-2M")
    assert ok.RTT_tcp == pytest.approx(1.0) and ok.RTT_ns3 == pytest.approx(1.2)
    assert ok.RTT_diff_pct == pytest.approx(20) and ok.size_diff_pct == pytest.approx(0)
    assert ok.completion_diff_pct == pytest.approx(100 * (5.6 / 5.5 - 1))
    assert ok.retrans_tcp == 2 * 1448 and ok.retrans_ns3 == 0
    assert ok.RTT_app_spread_pct == pytest.approx(100 * 0.1 / 1.05) and ok.truth_runs == 2
    assert ok.worst == "RTT" and not ok.agrees
    assert failed.status == "ns-3: magnet replay ns3 failed: 1 of 1 connections failed"
    assert np.isnan(failed.RTT_diff_pct) and failed.RTT_tcp == pytest.approx(1.0) and not failed.agrees
    text = (out / "suite" / "README.md").read_text()
    assert "## The suite's applications" in text and "**0 of 2 (application, path) cells agree" in text
    assert "**failed (ns-3)**" in text and "200ms-2M: ns-3: magnet replay ns3 failed" in text
    assert (out / "suite" / "heatmap.png").stat().st_size > 10_000


def test_several_studies_give_each_cell_its_medians_and_spreads(work, tmp_path):
    """A second study whose ns-3 answers as fast as Linux's: ns-3's RTT is the median of 1.2
    and 1.0 ms, its spread 0.2 / 1.1, Linux's 0; the completion error paired per study."""
    import shutil
    second = tmp_path / "second"
    shutil.copytree(work, second)
    ns3 = second / APP / "60ms-10M" / "demand-ns3"
    shutil.rmtree(ns3)
    kept(ns3, replay(MS // 2))
    out = tmp_path / "out"
    assert agreement.main(["--suite", str(work), "--suite", str(second), "--out", str(out)]) == 0
    table = pd.read_csv(out / "suite" / "suite.csv", keep_default_na=False, na_values=[""])
    ok, failed = table.iloc[0], table.iloc[1]
    assert (ok.runs_ns3, ok.runs_tcp, ok.truth_runs) == (2, 2, 4)
    assert ok.RTT_ns3 == pytest.approx(1.1) and ok.RTT_diff_pct == pytest.approx(10)
    assert ok.RTT_ns3_spread_pct == pytest.approx(100 * 0.2 / 1.1) and ok.RTT_tcp_spread_pct == 0
    assert ok.completion_err_pct == pytest.approx(100 * np.median([0.1 / 5.5, 0]))
    assert failed.failed == "ns-3" and failed.status.count("magnet replay ns3 failed") == 2
    text = (out / "suite" / "README.md").read_text()
    assert f"2 fidelity studies (`{work}`, `{second}`)" in text and "| 2 / 2 |" in text


def test_the_readme_names_each_studys_host_lags(work, tmp_path):
    """Per study, the host lags it recorded (host-lags.json in its --work), or that it recorded
    none; a record that cannot be read is a one-line error."""
    import shutil

    from magnet.experiments import common
    second = tmp_path / "second"
    shutil.copytree(work, second)
    common.HostLags(9_900, 7_300, 17_000, "measured", how="3 runs of 6 s").write(second / common.LAGS_FILE)
    out = tmp_path / "out"
    assert agreement.main(["--suite", str(work), "--suite", str(second), "--out", str(out)]) == 0
    text = (out / "suite" / "README.md").read_text()
    assert f"`{work}` recorded no host lags" in text
    assert f"`{second}`: ACK lag 9.9 us, reply lag 7.3 us, reader wake-up 17 us, measured (3 runs of 6 s)" in text
    (second / common.LAGS_FILE).write_text("not json")
    with pytest.raises(SystemExit) as e:
        agreement.main(["--suite", str(second), "--out", str(tmp_path / "bad")])
    assert e.value.code == 2


def test_a_changed_trace_changes_the_cell(work, tmp_path):
    """ns-3's answers as fast as Linux's: the cell agrees."""
    ns3 = work / APP / "60ms-10M" / "demand-ns3"
    for f in ns3.iterdir():
        f.unlink()
    ns3.rmdir()
    kept(ns3, replay(MS // 2))
    table = agreement_suite.cells(agreement_suite.kept_runs(work))
    assert table.iloc[0].RTT_diff_pct == pytest.approx(0) and table.iloc[0].agrees
    assert agreement_suite.headline(table)["agree"] == 1


def test_not_a_fidelity_work_directory(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        agreement.main(["--suite", str(tmp_path), "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "runs.csv" in err and not (tmp_path / "out").exists()


def test_an_exchange_crossed_by_a_probe_is_left_out(tmp_path):
    """The server's device resends 104 B (a tail loss probe) after connection 2's request
    left the client and before the server read it: that segment and the answer's first
    cannot be told apart without sequence numbers, so that exchange is not measured."""
    cap = replay(MS // 2)
    start = 20 * MS
    cap.add(SERVER, 202, Event.DEV_SEND, start + 1_200_000, 104, local=ENDS[SERVER], remote=(ENDS[CLIENT][0], 40002),
            pid=101)
    cap.add(CLIENT, 102, Event.DEV_RECV, start + 1_700_000, 104, local=ENDS[SERVER], remote=(ENDS[CLIENT][0], 40002))
    (tmp_path / "t").mkdir()
    p = app_metrics.profile(*cap.write(tmp_path / "t"))
    assert p.round_trips_s.tolist() == pytest.approx([1e-3]) and p.retrans_bytes("s2c") == 104
