"""The one dialect of knobs (magnetlib.knobs) and the scenario flags built on it."""
import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magnetlib import knobs
from magnet.replay import scenario

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


@pytest.mark.parametrize("text", ["20Mbps", "20mbit", "20e6", "20M", "20 Mbit/s", "20000000", "0.02Gbps"])
def test_rates_are_bits_whatever_the_spelling(text):
    assert knobs.rate(text) == 20_000_000


@pytest.mark.parametrize("text", ["20MB/s", "20MBps", "fast", "0", "-1M", "nan", "inf"])
def test_bad_rates_are_refused_with_the_syntax(text):
    with pytest.raises(ValueError, match="rate"):
        knobs.rate(text)


@pytest.mark.parametrize("text,ns", [("30ms", 30_000_000), ("0.03", 30_000_000), ("500us", 500_000),
                                     ("2s", 2_000_000_000), ("250ns", 250), ("0", 0)])
def test_times(text, ns):
    assert knobs.duration(text) == ns


@pytest.mark.parametrize("text,n", [("65536", 65536), ("64KiB", 65536), ("64kB", 64000), ("64k", 64000),
                                    ("1MiB", 1 << 20), ("1.5MB", 1_500_000), ("150kb", 150_000)])
def test_sizes(text, n):
    assert knobs.size(text) == n


def test_queues_in_packets_bytes_and_bdp():
    assert knobs.queue("100") == knobs.queue("100p") == knobs.Queue(100, "packets")
    assert knobs.queue("150kB") == knobs.Queue(150_000, "bytes")
    one_bdp = knobs.queue("1bdp")
    assert one_bdp.bytes(10e6, 60e6) == 75_000             # 10 Mbit/s x 60 ms
    assert one_bdp.packets(10e6, 60e6, 1500) == 50
    for bad in ("0p", "-3", "lots", "0bdp"):
        with pytest.raises(ValueError, match="queue"):
            knobs.queue(bad)


def test_loss_bernoulli_and_gilbert_elliott():
    assert knobs.loss("1%") == knobs.loss("0.01") == knobs.Loss(0.01)
    ge = knobs.loss("ge:1%/25%")
    assert ge.bursty and ge.mean == pytest.approx(0.01 / 0.26)
    assert knobs.loss(str(ge)) == ge
    for bad in ("101%", "ge:1%", "ge:1%/2%/3%/4%/5%", "x"):
        with pytest.raises(ValueError, match="loss"):
            knobs.loss(bad)


def test_congestion_control_names_of_both_engines():
    assert knobs.cc("TcpCubic") == knobs.cc("cubic") == "cubic"
    assert knobs.cc_for("ns-3", "cubic") == "TcpCubic"
    assert knobs.cc_for("tcp", "TcpNewReno") == "reno"
    with pytest.raises(ValueError, match="cubic, newreno, reno, bbr"):
        knobs.cc("nosuchcc")
    with pytest.raises(ValueError, match="available: bbr, cubic"):
        knobs.cc_for("tcp", "vegas", available=["cubic", "bbr"])


def test_streams_print_one_way():
    assert knobs.fmt_stream(176) == "0xb0"
    assert knobs.stream("0xb0") == knobs.stream("176") == 176


@given(st.integers(1, 10**12))
def test_rate_round_trips_through_its_printed_form(bps):
    assert knobs.rate(f"{bps}bit") == bps
    printed = knobs.fmt_rate(bps).replace(" ", "")
    assert abs(knobs.rate(printed) - bps) <= bps * 1e-3


@given(st.integers(0, 10**13))
def test_duration_round_trips(ns):
    assert knobs.duration(f"{ns}ns") == ns


def parse(argv):
    p = argparse.ArgumentParser()
    scenario.add_arguments(p)
    return scenario.from_args(p.parse_args(argv))


def test_scenario_flags_one_value_or_one_per_stack():
    s = parse(["--stacks", "3", "--rate", "20Mbps,10mbit", "--delay", "30ms", "--cc", "TcpNewReno",
               "--sack", "off", "--cross", "tcp:2", "--cross", "pareto:30%"])
    assert [s.path_of(k).rate_bps for k in (1, 2, 3)] == [20_000_000, 10_000_000, 10_000_000]
    assert {s.path_of(k).delay_ns for k in (1, 2, 3)} == {30_000_000}
    assert s.tcp.cc == "newreno" and not s.tcp.sack
    assert [c.kind for c in s.cross] == ["tcp", "pareto"]
    assert "stack 2's path: 10 Mbit/s" in s.describe()


def test_scenario_defaults_are_one_set():
    s = parse([])
    assert s == scenario.Scenario()
    assert s.path_of(1).rate_bps == 20_000_000 and s.tcp.cc == "cubic"


def test_duplex_is_a_path_knob_whose_default_a_command_may_change():
    """Off by default (chains keep their results); `magnet path` declares it on; a
    flag given wins over the command's default; the description says it, and where
    the cross traffic runs."""
    assert not parse([]).path_of(1).duplex
    s = parse(["--duplex", "off,on", "--cross", "tcp:1", "--stacks", "2"])
    assert [s.path_of(k).duplex for k in (1, 2)] == [False, True]
    assert "duplex: the same link each way" in s.describe()
    assert "both directions on the duplex paths" in s.describe()
    p = argparse.ArgumentParser()
    scenario.add_arguments(p, chain=False, path_defaults={"duplex": True}, tcp_knobs=["cc"])
    assert scenario.from_args(p.parse_args([])).path_of(1).duplex
    assert not scenario.from_args(p.parse_args(["--duplex", "off"])).path_of(1).duplex
    with pytest.raises(SystemExit):
        p.parse_args(["--stacks", "2"])
    with pytest.raises(SystemExit):
        p.parse_args(["--nagle", "off"])


@pytest.mark.parametrize("argv", [["--rate", "fast"], ["--cross", "udp:3"], ["--nagle", "maybe"],
                                  ["--stacks", "0"], ["--loss", "2"], ["--duplex", "both"]])
def test_bad_scenario_flags_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as e:
        parse(argv)
    assert e.value.code == 2
