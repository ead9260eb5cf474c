"""The benchmarks share the studies' harness (experiments/common.py): one parser (--quick,
--out, --note), one results writer (README.md with how the run was made, CSV tables),
one way to report repeated runs (median [min, max])."""
import importlib
import math

import pandas as pd
import pytest

from magnet.experiments import common

from .conftest import REPO

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

BENCHES = sorted(p.stem for p in (REPO / "experiments").glob("bench_*.py"))


@pytest.mark.parametrize("module", BENCHES)
def test_every_benchmark_takes_the_common_options(module, capsys):
    bench = importlib.import_module(f"magnet.experiments.{module}")
    with pytest.raises(SystemExit) as done:
        bench.main(["--help"])
    assert done.value.code == 0
    usage = capsys.readouterr().out
    assert usage.startswith(f"usage: python -m magnet.experiments.{module} ")
    for option in ("--quick", "--out", "--note"):
        assert option in usage, f"{module} has no {option}"


def test_a_quick_run_writes_its_results(tmp_path, capsys):
    """bench_parse --quick, really run: README.md says how it was made and judges the targets."""
    from magnet.experiments import bench_parse
    out = tmp_path / "parse"
    assert bench_parse.main(["--quick", "--out", str(out), "--note", "a test run"]) == 0
    readme = (out / "README.md").read_text()
    assert f"Made by `python -m magnet.experiments.bench_parse --quick --out {out} --note 'a test run'`" in readme
    assert "target 50 M" in readme and "target 20 M" in readme and "a test run" in readme
    frame = pd.read_csv(out / "results.csv")
    assert list(frame.trace) == ["native", "byte-swapped"]
    assert (frame.records > 0).all() and (frame.M_records_per_s > 0).all()
    assert readme in capsys.readouterr().out                  # and the figures on stdout


@pytest.mark.parametrize("values,fmt,expected", [
    ([3.0, 1.0, 2.0], "{:.3g}", "2 [1, 3]"),
    ([2.5], "{:.1f}", "2.5"),
    ([], "{:.3g}", "–"),
    ([math.nan, 4.0, 6.0], "{:.0f}", "5 [4, 6]"),
    (pd.Series([10.0, 30.0, math.nan]), "{:.0f}", "20 [10, 30]")])
def test_spread_is_median_min_max(values, fmt, expected):
    assert common.spread(values, fmt) == expected
