"""The ns-3 side of the agreement study's cross=tcp:4 cells, against the Linux runs a
committed agreement study holds (Linux is not re-run): the four bulk flows alone (the
cross study's queue and drops), the (workload, stack) cells, and a transfer's throughput
against when it starts among the flows.

    python -m magnet.experiments.agreement_ns3 [--against experiments/results/agreement]
        [--runs 3] [--leads 1,1.5,2] [--out DIR] [--quick]

The paper's and the variable demand are the study's (the variable one for seeds 1..--runs,
as its runs); vsftpd's demand is captured live over linkem by the study, so this plays a
stand-in: 62 writes of 64,516 B, 20.3 ms apart (the captured demand's count, sizes and
mean gap; ns-3's rows did not depend on its gaps).  With TCP cross traffic ns-3's only
draws are its bulk flows' starts (the real sender's lateness, from the seed and stack:
MagnetCrossTraffic::DrawStarts), and the cross traffic's lead (the replay starts that long
after the flows) moves a run too: --leads scans it for the stand-in's first stack, --chains
runs the offline chain one stack at a time, each stack with its own lead.

    python -m magnet.experiments.agreement_ns3 --map [--spread] [--settings ...] [--workloads ...]

--map re-runs the ns-3 side of every (setting, workload, run) the committed runs.csv holds
(its seeds, its synthetic demands' length, its stacks) and scores the cells as the study does
(agreement.cells: the same metrics, 10 % and 25 %), against the committed Linux rows;
--spread also against spread/runs.csv's Linux runs (the medians of each setting's runs, seeds 1..N).  vsftpd's
run replays the demand the study kept beside runs.csv for that (setting, run)
(vsftpd-demand-SETTING-runR.csv: what Linux replayed), and the stand-in above only where
the study kept none (results made before it kept them); the output says which.  While the
--quiet-file exists, it waits between runs.

ns-3's Linux profile gets the host lags the study recorded beside the Linux runs it is scored
against (host-lags.json in --against, and in --against/spread for --spread: the lags of the
host those Linux runs ran on), else experiments/common.py's constants; the README says which.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from magnet.replay.scenario import CROSS_LEAD_NS

from . import agreement, common, modmap

SETTING = "cross=tcp:4"
METRICS = {"size": "mean_size", "gap": "mean_gap_s", "throughput": "throughput_bps", "RTT": "rtt_measured_ms"}
VSFTPD_WRITES, VSFTPD_BYTES, VSFTPD_GAP_NS = 62, 4_000_000, 20_300_000
DURATION_BEFORE_RECORDED = 15.0         # the synthetic demands' length in studies that did not record it


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
    p.add_argument("--map", action="store_true", help="the whole map against the committed Linux runs (only)")
    p.add_argument("--spread", action="store_true", help="with --map: also against spread/runs.csv")
    p.add_argument("--settings", help="with --map: only these settings (default: every one runs.csv holds)")
    p.add_argument("--workloads", help="with --map: only these workloads (default: every one runs.csv holds)")
    p.add_argument("--quiet-file", type=Path,
                   help="with --map: wait between runs while this file exists (a shared machine's pause)")
    common.add_tcp_model(p)
    args = common.parse(p, argv)
    names = [s.name for s in modmap.SETTINGS]
    args.settings = common.choices(p, "--settings", args.settings or ",".join(names), names)
    args.workloads = common.choices(p, "--workloads", args.workloads or ",".join(modmap.WORKLOADS),
                                    modmap.WORKLOADS)
    args.cross_duration = 10.0 if args.quick else 30.0
    try:
        args.leads = [float(x) for x in args.leads.split(",")]
        args.chains = [[float(x) for x in chain.split(",")] for chain in args.chains.split(";")]
    except ValueError:
        p.error(f"--leads {args.leads!r}, --chains {args.chains!r}: seconds, ',' and ';' between them")
    if args.quick:
        args.runs, args.leads, args.chains = 1, args.leads[:1], [[1.0, 2.5]]
    linux = [args.against / "runs.csv", args.against / "spread" / "runs.csv", args.against / "cross.csv"]
    if args.map:                        # the map reads only the Linux runs it scores against
        linux = linux[:2] if args.spread else linux[:1]
    missing = [str(f) for f in linux if not f.is_file()]
    if missing:
        p.error(f"--against {args.against}: no {', '.join(missing)}")
    args.lags = args.spread_lags = None
    if args.tcp_model == "linux":
        try:
            args.lags = common.HostLags.recorded(args.against)
            if args.map and args.spread:
                args.spread_lags = common.HostLags.recorded(args.against / "spread")
        except common.StudyError as e:
            p.error(str(e))
    return args


def study_duration(against: Path) -> float:
    """The length of the synthetic demands of the study in `against` (runs.csv's duration_s)."""
    import pandas as pd
    recorded = pd.read_csv(against / "runs.csv", usecols=lambda c: c == "duration_s")
    lengths = recorded["duration_s"].dropna() if "duration_s" in recorded else ()
    return float(lengths.iloc[0]) if len(lengths) else DURATION_BEFORE_RECORDED


def vsftpd_standin():
    from magnetlib.demand import Demand
    sizes = np.full(VSFTPD_WRITES, VSFTPD_BYTES // VSFTPD_WRITES, np.int64)
    sizes[:VSFTPD_BYTES % VSFTPD_WRITES] += 1
    return Demand.from_arrays(np.arange(VSFTPD_WRITES, dtype=np.int64) * VSFTPD_GAP_NS, sizes)


def run_cells(args, work: Path, lead_s: float = CROSS_LEAD_NS / 1e9, stacks: int = 4,
              workloads=modmap.WORKLOADS):
    """ns-3's rows (stacks >= 1) for each workload (the variable one per seed)."""
    import pandas as pd
    from magnet.replay import engines
    setting = next(s for s in modmap.SETTINGS if s.name == SETTING)
    frames = []
    for workload in workloads:
        for seed in range(1, (args.runs if workload == "variable" else 1) + 1):
            demand = (vsftpd_standin() if workload == "vsftpd"
                      else modmap.demand_of(workload, study_duration(args.against), seed, None))
            out = engines.run("ns-3", demand, modmap.scenario_of(setting, stacks, seed),
                              work / f"{workload}-{seed}-{lead_s}",
                              **common.engine_options("ns-3", args.tcp_model, args.lags),
                              cross_lead_ns=int(lead_s * 1e9))
            rows = modmap.rows_of(out, {"workload": workload, "seed": seed, "lead_s": lead_s})
            frames.append(rows[rows["stack"] >= 1])
    return pd.concat(frames, ignore_index=True)


def compare(ns3, against: Path):
    """Per (workload, stack): ns-3's seed-1 value against Linux's run 1, and ns-3's median over
    seeds against Linux's median over spread/'s runs, in %."""
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
                              **common.engine_options("ns-3", args.tcp_model, args.lags),
                              cross_lead_ns=int(lead * 1e9))
            row = modmap.rows_of(out, {})
            rows.append({"chain": c, "stack": k, "lead_s": lead,
                         "throughput_bps": float(row[row["stack"] == 1]["throughput_bps"].iloc[0])})
            _, ns, size = report.chain_series(where / "demand.magnet", [where / "stack-1.magnet"])[1]
            demand = Demand.from_arrays(ns - ns[0], size)
    return pd.DataFrame(rows)


# ------------------------------------------------------------ the whole map ---
RUN_KEYS = ["setting", "workload", "seed", "demand", "lags", "duration_s"]    # what makes one ns-3 run of the map
STANDIN = "vsftpd (ns-3: stand-in)"     # the heat map's label of the stand-in's rows
STANDIN_DEMAND = "stand-in"             # the demand column of a vsftpd run the study kept no demand for
SYNTHETIC = "synthetic"                 # ... of the paper's and the variable demand (the study's own code)


def linux_runs(args, study: str):
    """The committed Linux rows (stack >= 0) of runs.csv ("map") or spread/runs.csv, each with
    the demand ns-3 is to replay: vsftpd's kept file, relative to --against (else
    STANDIN_DEMAND), SYNTHETIC for the paper's and the variable demand."""
    import pandas as pd
    where = args.against if study == "map" else args.against / "spread"
    runs = pd.read_csv(where / "runs.csv")
    runs = runs[(runs["engine"] == "tcp") & runs["setting"].isin(args.settings)
                & runs["workload"].isin(args.workloads)]
    within = where.relative_to(args.against)
    duration = runs["duration_s"] if "duration_s" in runs else DURATION_BEFORE_RECORDED
    return runs.assign(duration_s=pd.Series(duration, index=runs.index).fillna(DURATION_BEFORE_RECORDED),
                       study=study, demand=[kept_demand(args.against, within, w, s, r) for w, s, r
                                            in zip(runs["workload"], runs["setting"], runs["run"])],
                       lags=lags_key(study_lags(args, study)))


def study_lags(args, study: str):
    """The host lags ns-3 re-runs with against one Linux study ("map" or "spread"): its record's."""
    return args.spread_lags if study == "spread" and args.spread_lags is not None else args.lags


def lags_key(lags) -> str:
    """The lags column of the runs: ACK,REPLY,WAKEUP in ns (empty with ns-3's own TCP)."""
    return "" if lags is None else f"{lags.ack_lag_ns},{lags.reply_lag_ns},{lags.reader_wakeup_ns}"


def kept_demand(against: Path, within: Path, workload: str, setting: str, run: int) -> str:
    if workload != "vsftpd":
        return SYNTHETIC
    path = within / agreement.demand_file(setting, run)
    return str(path) if (against / path).is_file() else STANDIN_DEMAND


def demand_for(args, workload: str, seed: int, demand: str, duration_s: float):
    """What ns-3 replays for one Linux run: its kept demand, the stand-in, or the synthetic one
    (as long as the study's)."""
    from magnetlib.demand import read_demand
    if workload != "vsftpd":
        return modmap.demand_of(workload, duration_s, seed, None)
    return vsftpd_standin() if demand == STANDIN_DEMAND else read_demand(args.against / demand)


def lags_note(args) -> str:
    """The README's sentence on the host lags ns-3 ran with: the map's study's, and the spread
    study's where it recorded others."""
    note = common.wakeup_note(args.tcp_model, args.lags)
    if args.spread_lags is not None and lags_key(args.spread_lags) != lags_key(args.lags):
        note += "Against spread/runs.csv: " + common.wakeup_note(args.tcp_model, args.spread_lags)
    return note


def wait_while_quiet(args) -> None:
    while args.quiet_file and args.quiet_file.exists():
        time.sleep(10)


def rerun_map(args, work: Path, linux):
    """ns-3's chain for every (setting, workload, seed, demand, host lags) the Linux rows hold,
    each once, through as many stacks as they have."""
    import pandas as pd
    from magnet.replay import engines
    settings = {s.name: s for s in modmap.SETTINGS}
    todo = linux[RUN_KEYS].drop_duplicates().values.tolist()
    lags = {lags_key(study_lags(args, study)): study_lags(args, study) for study in set(linux["study"])}
    stacks = int(linux["stack"].max())
    frames = []
    for i, (name, workload, seed, kept, key, duration) in enumerate(common.progress(todo, "agreement_ns3 map")):
        wait_while_quiet(args)
        setting = settings[name]
        where = work / f"map-{i}-{name.replace('/', '_')}-{workload}-{seed}"
        demand = demand_for(args, workload, int(seed), kept, float(duration))
        out = engines.run("ns-3", demand, modmap.scenario_of(setting, stacks, int(seed)),
                          where, **common.engine_options("ns-3", args.tcp_model, lags[key]))
        frames.append(modmap.rows_of(out, {"engine": "ns-3", "workload": workload, "setting": name,
                                           "factor": setting.factor, "seed": int(seed), "demand": kept,
                                           "lags": key, "duration_s": float(duration)}))
    return pd.concat(frames, ignore_index=True)


def score(ns3, linux):
    """agreement.cells over ns-3's re-run rows and the committed Linux rows of one study
    (ns-3's run r is the one with Linux's run r's seed, demand and host lags)."""
    import pandas as pd
    keys = [k for k in RUN_KEYS if k in linux and k in ns3]          # rows made before the lags column too
    runs = linux[[*keys, "run"]].drop_duplicates()
    ns3 = ns3.merge(runs, on=keys)
    return agreement.cells(pd.concat([ns3, linux.drop(columns="study")], ignore_index=True))


def moved(table, committed):
    """Each cell beside the committed study's: its worst metric before and now."""
    old = committed[["setting", "workload", "stack", "worst", "worst_pct", "agrees"]]
    both = table.merge(old, on=["setting", "workload", "stack"], suffixes=("", "_committed"), how="left")
    both = both[both["agrees"] != both["agrees_committed"]]
    return both[["setting", "workload", "stack", "worst_committed", "worst_pct_committed", "worst", "worst_pct",
                 "agrees"]]


def summary(table) -> str:
    t = agreement.targets(table)
    return (f"{t['agree']} of {t['cells']} cells ({t['agree_pct']:.0f} %) within {agreement.TARGET_PCT:g} %, "
            f"{t['over_ceiling']} beyond {agreement.CEILING_PCT:g} %, the worst: {t['worst']}") if t else "no cells"


def vsftpd_note(linux) -> str:
    """How many of vsftpd's Linux runs ns-3 replays the kept demand of, how many the stand-in."""
    runs = linux[linux["workload"] == "vsftpd"][["study", "setting", "run", "demand"]].drop_duplicates()
    if runs.empty:
        return "no vsftpd run"
    standin = runs[runs["demand"] == STANDIN_DEMAND]
    note = f"vsftpd: {len(runs) - len(standin)} of {len(runs)} runs replay the demand the study kept"
    if len(standin):
        note += (f", {len(standin)} the stand-in (no kept demand: "
                 + ", ".join(f"{s} run {r}" for s, r in zip(standin["setting"], standin["run"])) + ")")
    return note


def standin_rows(table, linux):
    """The heat map's rows: a (setting, vsftpd) whose runs replayed the stand-in says so."""
    standin = set(linux[linux["demand"] == STANDIN_DEMAND]["setting"])
    label = table["workload"].where(~((table["workload"] == "vsftpd") & table["setting"].isin(standin)), STANDIN)
    return table.assign(workload=label)


def map_body(args, results, ns3, linux) -> str:
    """Per Linux study: the score with and without vsftpd, the cells that crossed 10 % since the
    committed study, agreement's own section (misses, every cell), the heat map."""
    import pandas as pd
    ns3.to_csv(results.path("map-runs.csv"), index=False)
    out, tables = [], {}
    for study in ("map", "spread") if args.spread else ("map",):
        part = linux[linux["study"] == study]
        table = tables[study] = score(ns3, part)
        table.to_csv(results.path(f"{study}-cells.csv"), index=False)
        out += [f"## Against {'runs.csv (Linux run 1)' if study == 'map' else 'spread/runs.csv (Linux medians over its runs)'}",
                "", f"- every cell ({vsftpd_note(part)}): **{summary(table)}**",
                f"- the study's synthetic demands only (vsftpd left out): "
                f"{summary(table[table['workload'] != 'vsftpd'])}", ""]
        if study == "map":
            committed = pd.read_csv(args.against / "cells.csv")
            out += ["### Cells that crossed 10 % since the committed study", "",
                    results.table("map-moved", moved(table, committed), "{:.1f}"), ""]
        out += [agreement.map_section(table).replace("## The map, cell by cell", "### Cell by cell"), "",
                f"![heat map]({study}-heatmap.png)", ""]
        results.figure(agreement.heatmap(standin_rows(table, part)), f"{study}-heatmap")
    if args.spread:
        both = combined(tables["map"], tables["spread"])
        out += ["## Both, as the committed README combines them", "",
                "The cells spread/ holds at the medians of its runs (ns-3's over the same seeds against Linux's), "
                "every other cell at run 1:", "",
                f"- every cell: **{summary(both)}**",
                f"- the study's synthetic demands only (vsftpd left out): "
                f"{summary(both[both['workload'] != 'vsftpd'])}",
                ""]
    return "\n".join(out)


def combined(single, medians):
    """The single run's cells, those that spread/ also holds replaced by its medians'."""
    import pandas as pd
    keys = ["setting", "workload", "stack"]
    kept = single.merge(medians[keys], on=keys, how="left", indicator=True)["_merge"].eq("left_only").values
    return pd.concat([single[kept], medians], ignore_index=True)


def main_map(args) -> int:
    import pandas as pd
    results = common.Results("agreement_ns3", args)
    linux = pd.concat([linux_runs(args, "map")] + ([linux_runs(args, "spread")] if args.spread else []))
    if linux.empty:
        common.gate(False, f"--against {args.against}: no Linux runs of {','.join(args.settings)} "
                           f"x {','.join(args.workloads)}")
    with common.workspace(args, "magnet-agreement-ns3-") as work:
        ns3 = rerun_map(args, work, linux)
    body = [f"ns-3 ({args.tcp_model} profile) re-run on every cell of the committed study in {args.against}, "
            "scored by agreement.cells against its Linux runs (Linux not re-run). vsftpd's demand was captured "
            "live by the study; ns-3 replays the capture the study kept for each (setting, run), what Linux "
            f"replayed, and where it kept none (a study made before it kept them) a stand-in ({VSFTPD_WRITES} "
            f"writes of {VSFTPD_BYTES // VSFTPD_WRITES:,} B, {VSFTPD_GAP_NS / 1e6:g} ms apart) against Linux on "
            f"the real server. {vsftpd_note(linux)}. Each score is given with and without vsftpd. "
            f"{lags_note(args)}", "",
            map_body(args, results, ns3, linux)]
    print(results.write("The ns-3 side of the whole map against committed Linux runs", "\n".join(body)))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    if args.map:
        return main_map(args)
    results = common.Results("agreement_ns3", args)
    with common.workspace(args, "magnet-agreement-ns3-") as work:
        cross = cross_rows(args, work)
        cells = compare(run_cells(args, work), args.against)
        scan = phase(args, work)
        chained = chains(args, work)
    agree = sum(all(abs(r[f"{m}_pct"]) <= 10 for m in METRICS) for _, r in cells.iterrows())
    body = [f"ns-3 ({args.tcp_model} profile) on {SETTING}, against the Linux runs in {args.against} "
            f"(Linux not re-run). {common.wakeup_note(args.tcp_model, args.lags)}", "",
            "## The four bulk flows alone", "",
            results.table("cross", cross), "", "## The cells (ns-3 vs Linux, %)", "",
            f"{agree} of {len(cells)} within 10 % on all four metrics (seed 1 against Linux's run 1); "
            "*_median_pct: ns-3's median over seeds against Linux's median over spread/'s runs.", "",
            results.table("cells", cells, "{:.1f}"), "",
            "## vsftpd's stand-in, stack 1, against the cross traffic's lead", "",
            results.table("phase", scan), "",
            "## vsftpd's stand-in through chains, each stack with its own lead", "",
            results.table("chains", chained), ""]
    print(results.write("The ns-3 side of cross=tcp:4 against committed Linux runs", "\n".join(body)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
