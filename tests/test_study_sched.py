"""Study 6 (sched): context-switch durations from the capture's scheduler events."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import magnetlib
from magnetlib.format import Event
from magnet.experiments.sched import switch_durations

from .capture_study import run_quick


E, S, L = int(Event.SCHED_ENTER), int(Event.SCHED_SWITCH), int(Event.SCHED_LEAVE)


def test_durations_pair_enter_and_leave_per_cpu(tmp_path):
    """ENTER -> [SWITCH] -> LEAVE on one CPU, CPUs interleaved in the file; a
    switch into a new task (no LEAVE) is not measured."""
    rows = [  # (ns, event, cpu, sockid)
        (1_000, E, 0, 10), (1_500, E, 1, 20), (3_000, S, 0, 10 << 32 | 11), (3_200, L, 1, 20),
        (4_000, L, 0, 11),                          # cpu 0: 3 us switch; cpu 1: 1.7 us kept task
        (9_000, E, 1, 20), (9_500, S, 1, 20 << 32 | 99),  # a forked task starts: no LEAVE
        (12_000, E, 1, 99), (12_400, S, 1, 99 << 32 | 20), (14_000, L, 1, 20),
    ]
    rec = magnetlib.empty_records(len(rows))
    for k, (ns, ev, cpu, sockid) in enumerate(rows):
        rec[k] = (sockid, ns, ev, cpu)
    path = magnetlib.write(tmp_path / "s.magnet", rec)
    with magnetlib.open(path) as trace:
        d = switch_durations(trace)
    assert d.cpu.tolist() == [0, 1, 1]                      # in order of entry
    assert d.switched.tolist() == [True, False, True]
    assert np.allclose(d.duration_us, [3.0, 1.7, 2.0])
    assert np.allclose(d.t_s, [0, 0.5e-6, 11e-6])
    assert d.next_pid.tolist() == [11, 0, 20]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """`sched --quick --duration 2`: each workload 2 s (--quick's 5); every check is of each
    CPU's switches, their medians and the spinner's CPU, which 2 s show (hundreds of switches a CPU)."""
    return run_quick("sched", tmp_path_factory.mktemp("sched"), options=("--duration", "2"))


def test_quick_run_measures_switches_idle_and_cpu_bound(quick):
    table = pd.read_csv(quick / "table.csv")
    assert set(table.workload) == {"idle", "CPU-bound"}
    assert len(table) == 2 * os.cpu_count()                 # one row per CPU and workload
    assert (table.switches > 0).all()
    assert (table.p10_us > 0).all() and (table.median_us > 0).all()
    assert (table.median_us < 1000).all()                   # microseconds, not a pairing error
    assert (table.lost == 0).all()
    bound = table[table.workload == "CPU-bound"]
    assert (bound.machine_cpu_pct >= 90).all()              # the spinner ran
    series = pd.read_csv(quick / "series.csv")
    assert (series.median_us > 0).all() and (series.switches > 0).all()


def test_quick_run_writes_figures_and_readme(quick):
    for name in ("fig12_idle.png", "fig13_cpu_bound.png", "distribution.png"):
        assert (quick / name).stat().st_size > 10_000
    readme = (quick / "README.md").read_text()
    assert "Paper:" in readme and "Probe effect" in readme and "magnet_sched_enter" in readme
