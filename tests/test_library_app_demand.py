"""A library of application captures: the path they ran across as a catalogue column, and
`magnet library export-demand --all`, the whole-application demand of each capture built
from the library's own records, the same as `magnet demand --all` of the trace files."""
from __future__ import annotations

import pandas as pd
import pytest

from magnetlib import app_demand, connections
from magnetlib.library import Library, export

from .conftest import assert_clean_error, run_magnet
from .test_app_demand import CLIENT, MS, SERVER, TracePair

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

pytest.importorskip("duckdb")


def two_runs(tmp_path):
    """A request/response application's two-sided capture, and a two-connection one's."""
    a, b = TracePair(), TracePair()
    a.connection(1, 0, [(CLIENT, 1 * MS, 300), (SERVER, 6_500_000, 2000)], close=(17 * MS, 18_200_000))
    b.connection(1, 0, [(CLIENT, 1 * MS, 100), (SERVER, 3 * MS, 5000)], close=(4 * MS, 5 * MS))
    b.connection(2, 5_500_000, [(CLIENT, 6 * MS, 100), (SERVER, 8 * MS, 70000)], close=(20 * MS, 21 * MS))
    runs = {}
    for name, cap in (("web.fast", a), ("web.slow", b)):
        folder = tmp_path / name
        folder.mkdir()
        written = cap.write(folder)
        runs[name] = [folder / f"{name}.{side}.magnet" for side in ("client", "server")]
        for src, dst in zip(written, runs[name]):
            (folder / src.rsplit("/", 1)[1]).rename(dst)
    return runs


def test_path_and_application_are_catalogue_columns(tmp_path):
    runs = two_runs(tmp_path)
    lib = Library.create(tmp_path / "lib")
    lib.add(runs["web.fast"], application="web", network_path="2ms-100Mbps")
    lib.add(runs["web.slow"], application="web", network_path="200ms-2Mbps")
    traces = lib.query("SELECT application, path FROM traces ORDER BY path, source")
    assert traces.values.tolist() == [["web", "200ms-2Mbps"]] * 2 + [["web", "2ms-100Mbps"]] * 2
    streams = lib.query("SELECT path, count(*) AS n FROM streams GROUP BY path ORDER BY path")
    assert streams.values.tolist() == [["200ms-2Mbps", 4], ["2ms-100Mbps", 2]]


def test_export_all_is_magnet_demand_all_of_each_capture(tmp_path):
    runs = two_runs(tmp_path)
    lib = tmp_path / "lib"
    for name, paths in runs.items():
        Library.create(lib).add(paths, application="web", network_path=name)
    out = tmp_path / "set"
    proc = run_magnet("library", "export-demand", lib, "-o", out, "--all", "--format", "magnet",
                      "--where", "path = 'web.slow'", check=True)
    assert "2 connections as whole-application demands" in proc.stderr_text
    index = pd.read_csv(out / "index.csv")
    assert index[["file", "path", "connections", "client_bytes", "server_bytes"]].values.tolist() == [
        ["web/web.slow.magnet", "web.slow", 2, 200, 75000]]
    got = app_demand.read(out / "web" / "web.slow.magnet")
    want = connections.build([str(p) for p in runs["web.slow"]])
    for column in app_demand.COLUMNS:
        assert getattr(got, column).tolist() == getattr(want, column).tolist(), column
    assert list(got.after[got.event == app_demand.OPEN]) == [0, 1]     # the dependency survived


def test_export_all_of_a_lone_trace_and_refusals(tmp_path):
    runs = two_runs(tmp_path)
    lib = tmp_path / "lib"
    Library.create(lib).add(runs["web.fast"][1:])       # the server's trace only
    out = tmp_path / "set"
    export.export_app_demand(Library(lib).layout, str(out))
    index = pd.read_csv(out / "index.csv")
    assert index["connections"].tolist() == [1] and index["server_bytes"].tolist() == [2000]
    assert_clean_error(run_magnet("library", "export-demand", lib, "-o", tmp_path / "x", "--all",
                                  "--layer", "dev"), "--layer", "--all")
    assert not (tmp_path / "x").exists()
