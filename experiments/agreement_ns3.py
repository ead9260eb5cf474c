"""The ns-3 side of the agreement study's cross=tcp:4 cells, against the Linux runs a
committed agreement study holds (Linux is not re-run): the four bulk flows alone (the
cross study's queue and drops), the (workload, stack) cells, and a transfer's throughput
against when it starts among the flows.

    python -m magnet.experiments.agreement_ns3 [--against experiments/results/agreement]
        [--runs 3] [--leads 1,1.5,2] [--out DIR] [--quick]

The paper's and the variable demand are the study's (the variable one for seeds 1..--runs,
as its runs); vsftpd's demand is captured live over linkem by the study, so this plays a
stand-in: 62 writes of 64,516 B, 20.3 ms apart (the captured demand's count, sizes and
mean gap; ns-3's rows did not depend on its gaps).  ns-3 draws no random number with TCP
cross traffic, so the cross traffic's lead (the replay starts that long after the flows)
is what moves a run: --leads scans it for the stand-in's first stack, --chains runs the
offline chain one stack at a time, each stack with its own lead.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from . import agreement, common, modmap

SETTING = "cross=tcp:4"
METRICS = {"size": "mean_size", "gap": "mean_gap_s", "throughput": "throughput_bps", "RTT": "rtt_measured_ms"}
VSFTPD_WRITES, VSFTPD_BYTES, VSFTPD_GAP_NS = 62, 4_000_000, 20_300_000


def options(argv):
    p = common.parser("agreement_ns3", __doc__, prog="python -m magnet.experiments.agreement_ns3")
    p.add_argument("--against", type=Path, default=Path("experiments/results/agreement"),
                   help="a committed agreement study (runs.csv, spread/runs.csv, cross.csv)")
    p.add_argument("--runs", type=int, default=3, help="seeds of the variable demand (default 3)")
    p.add_argument("--leads", default="1,1.25,1.5,1.75,2,2.5,3,3.5,4,5,6,8",
                   help="the cross traffic's leads to scan, s (default 12 from 1 to 8)")
    p.add_argument("--chains", default="1,1,1,1;1,2.5,3,5;3.5,1.25,2,8;2,4,6,1.5",
                   help="vsftpd's stand-in through chains of stacks, each with its own lead, s "
                        "(';' between chains, ',' between stacks)")
    p.add_argument("--work", type=Path, help="keep every run's files here (default: a temporary directory)")
    common.add_tcp_model(p)
    args = common.parse(p, argv)
    args.cross_duration = 10.0 if args.quick else 30.0
    try:
        args.leads = [float(x) for x in args.leads.split(",")]
        args.chains = [[float(x) for x in chain.split(",")] for chain in args.chains.split(";")]
    except ValueError:
        p.error(f"--leads {args.leads!r}, --chains {args.chains!r}: seconds, ',' and ';' between them")
    if args.quick:
        args.runs, args.leads, args.chains = 1, args.leads[:1], [[1.0, 2.5]]
    linux = [args.against / "runs.csv", args.against / "spread" / "runs.csv", args.against / "cross.csv"]
    missing = [str(f) for f in linux if not f.is_file()]
    if missing:
        p.error(f"--against {args.against}: no {', '.join(missing)}")
    return args


def vsftpd_standin():
    from magnetlib.demand import Demand
    sizes = np.full(VSFTPD_WRITES, VSFTPD_BYTES // VSFTPD_WRITES, np.int64)
    sizes[:VSFTPD_BYTES % VSFTPD_WRITES] += 1
    return Demand.from_arrays(np.arange(VSFTPD_WRITES, dtype=np.int64) * VSFTPD_GAP_NS, sizes)


def run_cells(args, work: Path, lead_s: float = 1.0, stacks: int = 4, workloads=modmap.WORKLOADS):
    """ns-3's rows (stacks >= 1) for each workload (the variable one per seed)."""
    import pandas as pd
    from magnet.replay import engines
    setting = next(s for s in modmap.SETTINGS if s.name == SETTING)
    frames = []
    for workload in workloads:
        for seed in range(1, (args.runs if workload == "variable" else 1) + 1):
            demand = vsftpd_standin() if workload == "vsftpd" else modmap.demand_of(workload, 15.0, seed, None)
            out = engines.run("ns-3", demand, modmap.scenario_of(setting, stacks, seed),
                              work / f"{workload}-{seed}-{lead_s}", tcp_model=args.tcp_model,
                              cross_lead_ns=int(lead_s * 1e9))
            rows = modmap.rows_of(out, {"workload": workload, "seed": seed, "lead_s": lead_s})
            frames.append(rows[rows["stack"] >= 1])
    return pd.concat(frames, ignore_index=True)


def compare(ns3, against: Path):
    """Per (workload, stack): ns-3's seed-1 value against Linux's run 1, and ns-3's median over
    seeds against Linux's 3-run median (spread/), in %."""
    import pandas as pd
    linux = pd.concat([pd.read_csv(against / "runs.csv").assign(study="run 1"),
                       pd.read_csv(against / "spread" / "runs.csv").assign(study="spread")])
    linux = linux[(linux["setting"] == SETTING) & (linux["engine"] == "tcp") & (linux["stack"] >= 1)]
    rows = []
    for (workload, stack), g in ns3.groupby(["workload", "stack"]):
        ref = linux[(linux["workload"] == workload) & (linux["stack"] == stack)]
        one, spread = ref[ref["study"] == "run 1"].iloc[0], ref[ref["study"] == "spread"]
        first = g[g["seed"] == 1].iloc[0]
        row = {"workload": workload, "stack": stack}
        for name, col in METRICS.items():
            row[f"{name}_pct"] = 100 * (first[col] - one[col]) / one[col]
            row[f"{name}_median_pct"] = 100 * (g[col].median() - spread[col].median()) / spread[col].median()
        row["retrans_ns3"], row["retrans_tcp"] = int(first["retrans_bytes"]), int(one["retrans_bytes"])
        rows.append(row)
    return pd.DataFrame(rows)


def cross_rows(args, work: Path):
    import pandas as pd
    ns3 = agreement.ns3_cross("tcp:4", args, work / "cross")
    linux = pd.read_csv(args.against / "cross.csv")
    linux = linux[(linux["engine"] == "tcp") & (linux["kind"] == "tcp:4")].iloc[0].to_dict()
    cols = ["engine", "share_pct", "drop_pct", "queue_p50", "queue_p90", "queue_p99", "queue_peak"]
    return pd.DataFrame([{c: r.get(c) for c in cols} for r in (ns3, linux)])


def phase(args, work: Path):
    import pandas as pd
    frames = [run_cells(args, work, lead, stacks=1, workloads=("vsftpd",)) for lead in args.leads]
    scan = pd.concat(frames, ignore_index=True)
    return scan[["lead_s", "throughput_bps", "rtt_measured_ms", "retrans_bytes"]]


def chains(args, work: Path):
    """The offline chain by hand: stack k + 1 replays stack k's wire (its DEV_SEND), each stack
    with its own lead (Linux's stacks meet the bulk flows at independent phases; magnet-chain's
    every stack at the same one); equal leads give magnet-chain's figures."""
    import pandas as pd
    from magnet.replay import engines, report
    from magnetlib.demand import Demand
    setting = next(s for s in modmap.SETTINGS if s.name == SETTING)
    rows = []
    for c, leads in enumerate(args.chains, 1):
        demand = vsftpd_standin()
        for k, lead in enumerate(leads, 1):
            where = work / f"chain-{c}-{k}"
            out = engines.run("ns-3", demand, modmap.scenario_of(setting, 1, args.seed), where,
                              tcp_model=args.tcp_model, cross_lead_ns=int(lead * 1e9))
            row = modmap.rows_of(out, {})
            rows.append({"chain": c, "stack": k, "lead_s": lead,
                         "throughput_bps": float(row[row["stack"] == 1]["throughput_bps"].iloc[0])})
            _, ns, size = report.chain_series(where / "demand.magnet", [where / "stack-1.magnet"])[1]
            demand = Demand.from_arrays(ns - ns[0], size)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    results = common.Results("agreement_ns3", args)
    with common.workspace(args, "magnet-agreement-ns3-") as work:
        cross = cross_rows(args, work)
        cells = compare(run_cells(args, work), args.against)
        scan = phase(args, work)
        chained = chains(args, work)
    agree = sum(all(abs(r[f"{m}_pct"]) <= 10 for m in METRICS) for _, r in cells.iterrows())
    body = [f"ns-3 ({args.tcp_model} profile) on {SETTING}, against the Linux runs in {args.against} "
            "(Linux not re-run).", "", "## The four bulk flows alone", "",
            results.table("cross", cross), "", "## The cells (ns-3 vs Linux, %)", "",
            f"{agree} of {len(cells)} within 10 % on all four metrics (seed 1 against Linux's run 1); "
            "*_median_pct: ns-3's median over seeds against Linux's 3-run median.", "",
            results.table("cells", cells, "{:.1f}"), "",
            "## vsftpd's stand-in, stack 1, against the cross traffic's lead", "",
            results.table("phase", scan), "",
            "## vsftpd's stand-in through chains, each stack with its own lead", "",
            results.table("chains", chained), ""]
    print(results.write("The ns-3 side of cross=tcp:4 against committed Linux runs", "\n".join(body)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
