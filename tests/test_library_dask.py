"""The Dask engine on a real local cluster (scheduler and worker processes) gives DuckDB's answers."""
import importlib.util
import os

import numpy as np
import pandas as pd
import pytest

from .conftest import require
from .librarygen import MIDNIGHT_NS, make_trace

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


def _require_packages():
    for name in ("pyarrow", "duckdb", "dask", "distributed"):
        require(importlib.util.find_spec(name) is not None, f"{name} is not installed (pip install .[library])")


@pytest.fixture(scope="module")
def cluster():
    _require_packages()
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_port=0, worker_dashboard_address=None, silence_logs=40) as local:
        yield local.scheduler_address


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    _require_packages()
    from magnetlib.library import Library
    d = tmp_path_factory.mktemp("mglib-dask")
    paths = [make_trace(d / "a.magnet", lost=[(0.4, 5), (1.7, 2)]),
             make_trace(d / "b.magnet", host="beta", ext=True, wall_ns=MIDNIGHT_NS + 10**12,
                        streams=((0x21, "ftp-paper"), (0x22, "bulk")), seed=2),
             make_trace(d / "c.magnet", host="gamma", wall_ns=None, streams=((0x31, "mp3"),), seed=4)]
    library = Library.create(d / "lib")
    library.add(paths[:2], application="ftp")
    library.add(paths[2:])
    return library


def same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert len(a) > 0
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False,
                                  rtol=1e-9)


@pytest.mark.parametrize("analysis", ["demand_stats", "modulation", "top_streams", "loss"])
def test_dask_cluster_gives_duckdbs_answers(lib, cluster, analysis):
    kwargs = {"loss": {"bin_s": 0.5}, "top_streams": {"n": 4}}.get(analysis, {})
    on_duckdb = getattr(lib, analysis)(**kwargs)
    on_cluster = getattr(lib, analysis)(engine="dask", scheduler=cluster, **kwargs)
    same(on_cluster, on_duckdb)


def test_dask_local_threads_too(lib):
    same(lib.demand_stats(engine="dask"), lib.demand_stats())


def test_cli_engine_option(lib, cluster, magnet, tmp_path):
    a, b = tmp_path / "duck.csv", tmp_path / "dask.csv"
    magnet("library", "modulation", lib.path, "-o", a, check=True)
    magnet("library", "modulation", lib.path, "--engine", "dask", "--scheduler", cluster, "-o", b, check=True)
    same(pd.read_csv(b), pd.read_csv(a))


def test_unreachable_scheduler_is_one_line(lib, magnet):
    from .conftest import assert_clean_error
    proc = magnet("library", "top", lib.path, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9")
    assert_clean_error(proc, "tcp://127.0.0.1:9", "cannot reach")


def replay_point(mss: int, rate_bps: float) -> dict:
    """A stand-in experiment: the modelled wire of a 5 s FTP demand at one (mss, rate)."""
    from magnetlib import synth
    _, seg, start = synth.model_wire(synth.ftp(5.0), mss=mss, rate_bps=rate_bps)
    return {"mss": mss, "rate_bps": rate_bps, "segments": len(seg), "last_ns": int(start[-1]), "pid": os.getpid()}


def test_parameter_sweep_on_the_cluster(cluster):
    from magnetlib.library.engines import map_params, param_grid
    grid = param_grid(mss=[536, 1448], rate_bps=[1e6, 1e7, 1e8])
    here = map_params(replay_point, grid)
    there = map_params(replay_point, grid, engine="dask", scheduler=cluster)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "pid"} for r in rows]
    assert strip(there) == strip(here) and len(here) == 6
    assert {r["pid"] for r in there}.isdisjoint({os.getpid()}), "the sweep did not run on the workers"
    assert [r["segments"] for r in here[:3]] == [np.ceil(10240 / 536) * 250] * 3
