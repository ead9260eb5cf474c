"""Study 2 (overhead): Table I and Fig. 6, magnet-read against tcpdump, from bench_capture."""
from __future__ import annotations

import pandas as pd
import pytest

from magnet.experiments import bench_capture as bench

from .capture_study import run_quick


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """`overhead --quick --runs 1 --duration 2`: each configuration once (10 iperf3 runs of 2 s
    with the cost runs, where --quick's 2 each of 3 s made 16); every check below is of each
    run or of the table's medians, which one run each makes as well, and its floors (100,000
    events a run, where 2 s at saturation give millions) hold at any length."""
    return run_quick("overhead", tmp_path_factory.mktemp("overhead"), "iperf3", "tcpdump", "ethtool",
                     options=("--runs", "1", "--duration", "2"))


def test_every_configuration_ran(quick):
    runs = pd.read_csv(quick / "runs.csv")
    assert set(runs.config) == set(bench.CONFIGS) | {bench.MAGNET_ALL}
    assert (runs.gbps > 0.1).all() and (runs.cpu_pct > 0).all() and (runs.traffic_cpu_pct > 10).all()
    by = {c: g for c, g in runs[runs.ns_per_event.isna()].groupby("config")}
    assert (by[bench.LOADED].events == 0).all() and (by[bench.LOADED].lost > 0).all()  # never drained
    for config in (bench.MAGNET_RCV, bench.MAGNET_SND):
        g = by[config]
        assert (g.events > 100_000).all() and (g.tool_cpu_pct > 0).all()
        assert (g.lost <= 0.001 * (g.events + g.lost)).all()     # default buffer: (almost) nothing lost
    for config in (bench.TCPDUMP_RCV, bench.TCPDUMP_SND):
        assert (by[config].events > 10_000).all()
    costs = runs[runs.ns_per_event.notna()]
    assert ((costs.ns_per_run > 20) & (costs.ns_per_run < 5_000)).all()


def test_table_has_todays_and_the_papers_figures(quick):
    table = pd.read_csv(quick / "table_I.csv").set_index("configuration")
    assert table.loc[bench.BASELINE, "reduction_pct"] == 0
    assert table.loc[bench.MAGNET_RCV, "paper_reduction_1000"] == pytest.approx(3.30)
    assert table.loc[bench.TCPDUMP_RCV, "paper_reduction_1000"] == pytest.approx(36.74)
    assert table.reduction_pct.between(-100, 100).all()
    assert (table.load == "max").all()
    assert "kernel cost per event" in (quick / "table_I.md").read_text()


def test_figure_and_readme(quick):
    assert (quick / "fig6.png").stat().st_size > 10_000
    readme = (quick / "README.md").read_text()
    assert "fig6.png" in readme and "| kernel |" in readme and "magnet experiment overhead --quick" in readme
    assert "Where the kernel time goes" in readme and "load averages" in readme


def test_kernel_time_per_program(quick):
    """Per program (attach point): runs, ns per run and share of the kernel time,
    beside throughput and CPU per transferred GB: where the capture's cost goes."""
    programs = pd.read_csv(quick / "programs.csv")
    assert set(programs.configuration) == set(bench.MAGNET_CONFIGS)
    everything = programs[programs.configuration == bench.MAGNET_ALL].set_index("program")
    assert {"sockops", "cgroup_skb/egress", "tp_btf/netif_receive_skb"} <= set(everything.attach)
    assert everything.loc["magnet_dev_recv", "runs_per_s"] > 10_000
    ran = programs[programs.runs_per_s > 0]
    assert ((ran.ns_per_run > 20) & (ran.ns_per_run < 5_000)).all()
    shares = programs.groupby("configuration").share_pct.sum()
    assert shares.to_numpy() == pytest.approx(100.0)
    assert ((programs.gbps > 0.1) & (programs.cpu_s_per_gb > 0)).all()
    table = pd.read_csv(quick / "table_I.csv")
    assert (table.cpu_s_per_gb > 0).all()
