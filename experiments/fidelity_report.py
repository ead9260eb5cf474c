"""The fidelity study's results: fidelity.csv, summary.csv, runs.csv, the figures and README.md.

summary.csv has a row per (application, path, predictor): each metric's median over
the comparisons with the truth runs, and for the ground truth ("truth") the largest
value over its pairs of runs, the floor.  A demand-driven prediction meets a target
when its median is at most the target, or at most the floor + 0.05 where the floor is
above the target.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from magnetlib import app_metrics

from . import common

METRICS = ["ks_size", "ks_gap", "completion_err_median", "completion_err_p90", "response_ks",
           "response_err_median", "throughput_err", "bytes_diff"]
DETAIL = ["ks_gap_2pct", "ks_size_c2s", "ks_size_s2c", "ks_gap_c2s", "ks_gap_s2c", "completion_s", "response_s",
          "start_lag_s", "span_ratio", "answering", "tail_gap_s", "connections", "connections_truth"]
DIAGNOSTIC = ["ks_gap_2pct", "completion_s", "response_s", "start_lag_s", "span_ratio", "answering", "tail_gap_s"]
COLUMNS = ["app", "path", "predictor", "run", *METRICS, *DETAIL, "status"]
TARGETS = {"ks_size": 0.10, "ks_gap": 0.15, "completion_err_median": 0.10, "response_err_median": 0.10}
MARGIN = 0.05
DEMAND = ("demand-tcp", "demand-ns3")
WIRE = {"demand-tcp": ("wire-adu-tcp", "wire-open-tcp"), "demand-ns3": ("wire-adu-ns3", "wire-open-ns3")}
SHORT = {"ks_size": "KS size", "ks_gap": "KS gap", "completion_err_median": "compl. err p50",
         "completion_err_p90": "compl. err p90", "response_ks": "resp. KS", "response_err_median": "resp. err p50",
         "throughput_err": "thr. err", "bytes_diff": "bytes diff"}


# ---------------------------------------------------------------- tables ---
def fidelity_frame(rows: pd.DataFrame) -> pd.DataFrame:
    for column in COLUMNS:
        if column not in rows:
            rows[column] = np.nan
    return rows[COLUMNS]


def summarise(rows: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Per (app, path, predictor): medians over comparisons (the truth: the largest pair),
    the floor and threshold of each target metric, and whether a prediction meets it."""
    ok = rows[rows["status"] == "ok"]
    pred = ok[ok["predictor"] != "truth"].groupby(["app", "path", "predictor"], sort=False)[
        METRICS + DIAGNOSTIC].median()
    floor = ok[ok["predictor"] == "truth"].groupby(["app", "path"], sort=False)[METRICS + DIAGNOSTIC].max()
    floor = floor.assign(predictor="truth").set_index("predictor", append=True)
    out = pd.concat([floor, pred]).reset_index()
    for metric, target in TARGETS.items():
        f = out.merge(floor.reset_index()[["app", "path", metric]], on=["app", "path"], how="left",
                      suffixes=("", "_floor"))[f"{metric}_floor"].to_numpy()
        out[f"{metric}_limit"] = np.where(np.nan_to_num(f, nan=0.0) > target, f + MARGIN, target)
        out[f"{metric}_met"] = (out[metric] <= out[f"{metric}_limit"]).where(out["predictor"] != "truth")
    failed = rows[rows["status"] != "ok"][["app", "path", "predictor", "status"]].drop_duplicates()
    out = out.merge(failed, on=["app", "path", "predictor"], how="outer")
    out["status"] = out["status"].fillna("ok")
    rank = {p: i for i, p in enumerate(["truth", *order])}
    return out.sort_values(["app", "path", "predictor"], key=lambda s: s.map(rank) if s.name == "predictor"
                           else s, kind="stable").reset_index(drop=True)


def targets(summary: pd.DataFrame) -> pd.DataFrame:
    """Per demand-driven predictor and target: met in how many (application, path) cells."""
    rows = []
    for predictor in DEMAND:
        part = summary[summary["predictor"] == predictor]
        for metric, target in TARGETS.items():
            met = part[f"{metric}_met"].dropna()
            misses = part.loc[part[f"{metric}_met"] == False, ["app", "path"]]     # noqa: E712
            rows.append({"predictor": predictor, "target": f"{SHORT[metric]} <= {target:g}",
                         "met": f"{int(met.sum())} of {len(met)}",
                         "missed in": ", ".join(f"{a} {p}" for a, p in misses.itertuples(index=False)) or "-"})
    return pd.DataFrame(rows)


def ratios(summary: pd.DataFrame) -> pd.DataFrame:
    """Per application and engine: median over paths of demand-driven error / wire-driven error."""
    rows = []
    for app, part in summary.groupby("app", sort=False):
        for demand, wires in WIRE.items():
            row = {"app": app, "engine": demand.split("-")[1]}
            for wire in wires:
                for metric in ("ks_size", "ks_gap", "completion_err_median", "response_err_median"):
                    d = part[part["predictor"] == demand].set_index("path")[metric]
                    w = part[part["predictor"] == wire].set_index("path")[metric]
                    with np.errstate(divide="ignore", invalid="ignore"):
                        r = (d / w.reindex(d.index)).replace([np.inf, -np.inf], np.nan)
                    row[f"{SHORT[metric]} / {wire.rsplit('-', 1)[0]}"] = float(r.median()) if r.notna().any() \
                        else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def headline(rows: pd.DataFrame, app: str, path: str) -> str:
    """One line: each predictor's completion error and KS of sizes on one application and
    path, beside the ground truth's own spread."""
    s = summarise(rows, list(dict.fromkeys(rows["predictor"])))
    s = s[(s["app"] == app) & (s["path"] == path)].set_index("predictor")
    cells = []
    for p, r in s.iterrows():
        if r["status"] != "ok":
            cells.append(f"{p} {'unavailable' if r['status'].startswith('unavailable') else 'failed'}")
        else:
            cells.append(f"{p} {r['completion_err_median'] * 100:.0f}%/{r['ks_size']:.2f}")
    return (f"fidelity of {app} on {path} (completion-time error / KS of segment sizes; 'truth' is the "
            f"real application's run-to-run spread): " + ", ".join(cells))


# --------------------------------------------------------------- figures ---
def heatmap(summary: pd.DataFrame, predictors: list[str]):
    """Application x predictor, the median over paths: KS sizes, KS gaps, completion error."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    apps = list(dict.fromkeys(summary["app"]))
    cols = ["truth", *predictors]
    metrics = [("ks_size", "KS of segment sizes", 1.0), ("ks_gap", "KS of gaps", 1.0),
               ("completion_err_median", "completion-time error (median)", 1.0)]
    fig, axes = plt.subplots(1, 3, figsize=(18, 0.5 * len(apps) + 2.5))
    for ax, (metric, title, vmax) in zip(axes, metrics):
        grid = summary.pivot_table(index="app", columns="predictor", values=metric, aggfunc="median")
        grid = grid.reindex(index=apps, columns=cols)
        ax.imshow(grid.to_numpy(float), cmap="Reds", vmin=0, vmax=vmax, aspect="auto")
        ax.set_xticks(range(len(cols)), cols, rotation=40, ha="right")
        ax.set_yticks(range(len(apps)), apps)
        for (i, j), v in np.ndenumerate(grid.to_numpy(float)):
            ax.text(j, i, "–" if v != v else f"{v:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if v == v and v > 0.6 * vmax else "black")
        ax.set_title(f"{title}\n(median over paths; 'truth': the floor)")
    fig.tight_layout()
    return fig


def cdfs(app: str, sites: list[str], profiles: dict, runs, predictors: list[str]):
    """Truth (every run pooled) against every predictor, and the source on path A: the
    CDFs of segment sizes and gaps (the busier direction) and of response times, a row per path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    mine = [r for r in runs if r.app == app and id(r) in profiles]
    source = next((profiles[id(r)] for r in mine if r.kind == "source"), None)
    fig, axes = plt.subplots(len(sites), 3, figsize=(12, 2.7 * len(sites)), squeeze=False)
    colours = dict(zip(predictors, plt.cm.tab10(np.arange(len(predictors)))))
    for row, site in zip(axes, sites):
        truths = [profiles[id(r)] for r in mine if r.site == site and r.kind == "truth"]
        if not truths:
            continue
        d = max(app_metrics.DIRECTIONS, key=lambda x: sum(len(t.sizes(x)) for t in truths))
        series = [("truth", truths, "black", 2.2, "-")]
        series += [(p, [profiles[id(r)] for r in mine if r.site == site and r.kind == p], colours[p], 1.2, "-")
                   for p in predictors]
        if source:
            series.append(("source on A", [source], "grey", 1.2, ":"))
        for ax, (title, get, log) in zip(row, [(f"segment sizes, {d} (B)", lambda p: p.sizes(d), False),
                                               (f"gaps, {d} (s)", lambda p: p.gaps(d), True),
                                               ("response times (s)", lambda p: p.responses, True)]):
            for label, profs, colour, width, style in series:
                values = np.sort(np.concatenate([get(p) for p in profs])) if profs else np.zeros(0)
                if log:
                    values = values[values > 0]
                if len(values):
                    ax.step(np.r_[values[0], values], np.arange(len(values) + 1) / len(values), where="post",
                            color=colour, lw=width, ls=style, label=label)
            ax.set_xscale("log" if log else "linear")
            ax.set_title(f"{app} on {site}: {title}", fontsize=9)
            ax.grid(alpha=0.3)
    drawn = [ax for ax in np.ravel(axes) if ax.get_legend_handles_labels()[0]]
    if drawn:                                       # the key on the first panel with a line in it
        drawn[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- README ---
def app_table(summary: pd.DataFrame, app: str) -> str:
    part = summary[summary["app"] == app]
    show = part[["path", "predictor", *METRICS, "ks_gap_2pct", "status"]].copy()
    for metric in TARGETS:
        met = part[f"{metric}_met"]
        show[SHORT[metric]] = [_cell(v, m) for v, m in zip(part[metric], met)]
    show = show.rename(columns={m: SHORT[m] for m in METRICS if m not in TARGETS})
    show["bytes diff"] = show["bytes diff"].map(lambda v: "–" if v != v else f"{v:.0f}")
    show = show.rename(columns={"ks_gap_2pct": "KS gap ±2%"})
    show = show[["path", "predictor", "KS size", "KS gap", "KS gap ±2%", *[SHORT[m] for m in METRICS[2:]],
                 "status"]]
    show["status"] = show["status"].map(lambda s: "" if s == "ok" else s[:80])
    return common.markdown(show)


def _cell(value: float, met) -> str:
    if value != value:
        return "–"
    mark = "" if met is None or met != met else (" ✓" if met else " ✗")
    return f"{value:.3f}{mark}"


def write(args, runs, rows: pd.DataFrame, profiles: dict, minutes: float, context: dict) -> "Path":
    from . import fidelity as study
    results = common.Results("fidelity", args)
    rows = fidelity_frame(rows)
    rows.to_csv(results.path("fidelity.csv"), index=False)
    study.runs_frame(runs).to_csv(results.path("runs.csv"), index=False)
    if context.get("lags") is not None:
        context["lags"].write(results.path(common.LAGS_FILE))
    predictors = ran(args, runs)
    summary = summarise(rows, predictors)
    summary.to_csv(results.path("summary.csv"), index=False)
    body = [intro(args, runs, minutes, context)]
    if len(summary):
        results.figure(heatmap(summary, predictors), "heatmap")
        body += ["## Targets (demand-driven, both engines)", "", common.markdown(targets(summary)), "",
                 "Each cell: the prediction's median over its comparisons with the truth runs; the limit is "
                 f"the target, or the floor + {MARGIN} where the ground truth's own spread (its largest "
                 "pair) is above the target.", "",
                 "## Summary: application x predictor", "", "![heat map](heatmap.png)", "",
                 "## Demand-driven error / wire-driven error", "",
                 "Per application and engine, the median over paths of the ratio (below 1: the demand "
                 "predicts better than the wire).", "", common.markdown(ratios(summary), "{:.2f}"), ""]
    for app in args.apps:
        body += [f"## {app}", ""]
        if (summary["app"] == app).any():
            body += [app_table(summary, app), ""]
            results.figure(cdfs(app, args.paths, profiles, runs, predictors), f"cdf-{app}")
            body += [f"![CDFs of {app}](cdf-{app}.png)", ""]
        else:
            body += ["No result: " + "; ".join(sorted({r.status for r in runs if r.app == app and
                                                         r.status != "ok"})), ""]
    body.append(findings(summary, context.get("facts"), args))
    return results.write("Fidelity: does a demand-driven replay predict the real application on another path?",
                         "\n".join(body))


def intro(args, runs, minutes: float, context: dict) -> str:
    from . import fidelity as study
    failed = [r for r in runs if r.status != "ok"]
    ns3 = study.ns3_options(runs)
    predictors = ran(args, runs)
    lines = [
        f"{len(args.apps)} applications, their source run on path A ({study.SOURCE.title}) and "
        f"{args.runs} ground-truth runs on each path B, predicted by {len(predictors)} "
        f"predictor{'s' if len(predictors) != 1 else ''} ({', '.join(predictors)}) from "
        f"path A's capture alone. {len(runs) - len(failed)} of {len(runs)} runs ok; {_took(args, runs, minutes)}. "
        f"Load average {context.get('load', '?')}; {context.get('others', '')}", "",
        "| path | flags | what |", "|---|---|---|",
        f"| A (source) | `{study.SOURCE.flags}` | {study.SOURCE.title} |",
        *[f"| {s} | `{study.SITES[s].flags}` | {study.SITES[s].title} |" for s in args.paths], "",
        "Work per application (the recipes' parameters; experiments/apps/): " + "; ".join(
            f"{app} " + ", ".join(f"{k} {v:,}" for k, v in study.recipe_of(app, args.full_work).work().items())
            for app in args.apps) + ".", "",
        "Every path is duplex (the same link each way). The source run is captured by `magnet path "
        "--capture` and by tcpdump on the client's device (next to the client, as a tcpdump on the client "
        "host: the server side's think times it shows hold path A's round trip). Metrics: "
        "magnetlib.app_metrics (segments are those the receiving device got; completion from a "
        "connection's first byte written to its last byte read; connections matched in order of first "
        "write).", "",
        f"ns-3 replays: `magnet replay ns3 {ns3 or '(its defaults)'}`. {lags_line(args, context.get('lags'))}", ""]
    if failed:
        lines += ["**Runs that failed or could not run:**", ""]
        lines += [f"* {r.label()}: {r.status}" for r in failed] + [""]
    return "\n".join(lines)


def ran(args, runs) -> list[str]:
    """The predictors the study's runs hold (of --predictors, in its order): a study made with
    some, measured again (--reanalyse, --rerun) under the default --predictors, has only those."""
    kinds = {r.kind for r in runs}
    return [p for p in args.predictors if p in kinds]


def lags_line(args, lags) -> str:
    """The README's sentence on the host's lags ns-3 ran with and where they came from."""
    if lags is None:
        return ("The study in --work recorded no host lags (made before studies measured them): its ns-3 "
                "replays ran with the options above.") if args.reanalyse else ""
    said = (f"The host's lags they ran with: ACK lag {lags.ack_lag_ns / 1000:g} us, reply lag "
            f"{lags.reply_lag_ns / 1000:g} us, reader wake-up {lags.reader_wakeup_ns / 1000:g} us: "
            f"{lags.provenance()}")
    return said + (f" ({common.LAGS_FILE})." if not lags.read_from else ".")


def _took(args, runs, minutes: float) -> str:
    if not (args.reanalyse or args.rerun):
        return f"the study took {minutes:.1f} min"
    made = sum(r.seconds for r in runs if r.seconds == r.seconds) / 60
    if args.rerun:
        again = sum(r.kind in args.rerun for r in runs)
        return (f"{again} of the runs ({', '.join(args.rerun)}) re-run (--rerun) by this checkout's ns-3 in "
                f"{minutes:.1f} min, the others those an earlier study kept in --work (all runs' own times "
                f"add up to {made:.1f} min)")
    return (f"measured again (--reanalyse) from the runs an earlier study kept in --work (their own times "
            f"add up to {made:.1f} min)")


# --------------------------------------------------------------- findings ---
WAITS_DROP = 0.15        # the share of ADUs that answer falls by this much from A to B
LAG_S = 0.05             # connections start this much later than the application's
EARLY_SHARE = 0.1        # ... or earlier, by this share of their completion time at least
SHORTER = 0.8            # a replay whose whole run takes less than this share of the application's
HELD_S = 0.02            # a write's short tail held this much longer by one engine


def findings(summary: pd.DataFrame, facts: pd.DataFrame | None, args) -> str:
    """In words, per application: where the demand-driven replays meet the targets, which
    they miss, and the mechanisms the study's diagnostics point to; how the wire compares."""
    if facts is None or not len(facts) or not len(summary):
        return ""
    lines = ["## Findings", "",
             "Drawn by the study from its own diagnostics (per application: the demand's connections and "
             "dependencies, the share of ADUs whose writer had read all of the previous one, on A and in "
             "the truth on each B; each prediction's start lag and run length against the truth's); a "
             "miss no diagnostic explains is said to be unexplained.", ""]
    for app in dict.fromkeys(summary["app"]):
        part = summary[summary["app"] == app]
        lines.append(f"**{app}.** " + " ".join(_app_findings(app, part, facts)))
        lines.append("")
    return "\n".join(lines)


def _app_findings(app: str, part: pd.DataFrame, facts: pd.DataFrame) -> list[str]:
    source = facts[(facts["app"] == app) & (facts["path"] == "A")]
    src = source.iloc[0] if len(source) else None
    out = []
    for predictor in DEMAND:
        mine = part[part["predictor"] == predictor]
        if not len(mine) or (mine["status"] != "ok").all():
            out.append(f"{predictor}: no result.")
            continue
        miss = pd.DataFrame({m: mine[f"{m}_met"].eq(False) for m in TARGETS})
        good = mine["path"][~miss.any(axis=1) & (mine["status"] == "ok")].tolist()
        missed = {p: [SHORT[m] for m in TARGETS if row[m]] for p, (_, row) in zip(mine["path"], miss.iterrows())
                  if row.any()}
        said = [f"meets every target on {_paths(good)}"] if good else []
        if missed:
            said.append("misses " + "; ".join(f"{', '.join(ms)} on {p}" for p, ms in missed.items()))
        out.append(f"{predictor} " + "; ".join(said or ["has no comparison"]) + ".")
    out += _mechanisms(app, part, facts, src)
    out.append(_wire_words(part))
    return out


def _mechanisms(app, part, facts, src) -> list[str]:
    """Sentences for the mechanisms whose evidence is in the diagnostics."""
    out = []
    demand = part[part["predictor"].isin(DEMAND)]
    missed = demand[[f"{m}_met" for m in TARGETS]].eq(False).any(axis=1)
    bad = demand[missed]
    if src is not None and src.get("after", 0) > 0:
        late = bad[bad["start_lag_s"] > LAG_S]
        if len(late):
            out.append(f"Mechanism, inferred dependencies between connections: {int(src['after'])} of its "
                       f"{int(src['connections'])} connections open `after` an earlier one in the demand (opened "
                       "by the same process within 1 s of reading that one's last byte, on A); where the "
                       f"replay misses, its connections start {late['start_lag_s'].median():.2f} s later than "
                       "the application's (median): the application opened them on its own clock.")
    slow = demand[demand[["completion_err_median_met", "response_err_median_met"]].eq(False).any(axis=1)]
    early = slow[(slow["start_lag_s"] < -LAG_S) & (-slow["start_lag_s"] > EARLY_SHARE * slow["completion_s"])]
    if len(early):
        out.append(f"Mechanism, a connection opened in answer to another's data: where the replay misses a time, its "
                   f"connections start {-early['start_lag_s'].median():.2f} s earlier than the application's "
                   "(median). The application opened them once an exchange on another connection had crossed B "
                   "(as FTP opens its data connection after the reply to PASV); the demand opens them at their "
                   "time on A, a dependency between connections it holds only as `after` (one has ended).")
    truth = facts[(facts["app"] == app) & (facts["path"] != "A")].set_index("path")["answering"]
    if src is not None and src["answering"] == src["answering"]:
        dropped = truth[truth < src["answering"] - WAITS_DROP]
        hit = bad[bad["path"].isin(dropped.index) & (bad["span_ratio"] > 1 / SHORTER)]
        if len(hit):
            out.append(f"Mechanism, inferred waits: on A {src['answering']:.0%} of its ADUs came after their "
                       "writer had read all of the previous one; in the truth on "
                       + ", ".join(f"{p} {v:.0%}" for p, v in dropped.items()) + ": the application does not "
                       "wait for every answer before it writes (it writes on its own clock, or keeps requests "
                       "in flight), and the demand, built where every answer came first, makes each write "
                       "wait for one (the replay runs "
                       f"{hit['span_ratio'].median():.1f}x as long as the application).")
    engines = demand.pivot_table(index="path", columns="predictor", values="completion_err_median")
    if set(DEMAND) <= set(engines.columns):
        apart = engines[(engines[DEMAND[0]] - engines[DEMAND[1]]).abs() > 0.1]
        if len(apart):
            out.append("The engines disagree on " + ", ".join(
                f"{p} (completion error real TCP {r[DEMAND[0]]:.0%}, ns-3 {r[DEMAND[1]]:.0%})"
                for p, r in apart.iterrows()) + ": the same demand, two TCPs." + _held_tails(demand, apart.index))
    gap_missed = bad[bad["ks_gap"] > bad["ks_gap_limit"]] if len(bad) else bad
    if len(gap_missed) and (gap_missed["ks_gap_2pct"] <= gap_missed["ks_gap_limit"]).all():
        out.append("Its KS of gaps misses only at the microsecond scale: with gaps within 2 % of each other "
                   f"counted equal it is {gap_missed['ks_gap_2pct'].max():.2f} at most (near-deterministic gaps, "
                   "a serialisation time or a think time, shifted by less than the capture's and the "
                   "emulator's timing noise).")
    if len(bad) and not out:
        out.append("The demand's misses are not explained by the study's diagnostics.")
    wire_adu = part[part["predictor"].str.startswith("wire-adu") & (part["span_ratio"] < SHORTER)]
    if src is not None and len(wire_adu) and src.get("wire-adu_sends", 0) < 0.5 * src.get("demand_sends", 0):
        out.append(f"The wire's ADUs merge the application's {int(src['demand_sends'])} writes into "
                   f"{int(src['wire-adu_sends'])} sends: Tmix writes an ADU whole, losing the application's "
                   f"pacing inside it (the replay takes {wire_adu['span_ratio'].median():.2f}x the application's "
                   "time).")
    wire_open = part[part["predictor"].str.startswith("wire-open") & (part["span_ratio"] < SHORTER)]
    if len(wire_open):
        out.append("Open loop: every segment at its time on A, so its requests and answers do not wait for "
                   f"B's longer round trips (the replay takes {wire_open['span_ratio'].median():.2f}x the "
                   "application's time).")
    return out


def _held_tails(demand: pd.DataFrame, paths) -> str:
    """Where one engine holds the short last segment of a write far longer than the other."""
    tails = demand[demand["path"].isin(paths)].pivot_table(index="path", columns="predictor", values="tail_gap_s")
    if not set(DEMAND) <= set(tails.columns):
        return ""
    ns3, tcp = tails[DEMAND[1]].median(), tails[DEMAND[0]].median()
    if not ns3 > tcp + HELD_S:
        return ""
    return (f" Mechanism: ns-3 sends the short last segment of a write {ns3 * 1e3:.0f} ms after the full one "
            f"before it (median; real TCP {tcp * 1e3:.1f} ms): its Nagle check holds that tail until the data "
            "before it is acknowledged (a round trip, plus the delayed-ACK timeout when that ACK is delayed), "
            "where Linux sent it sooner.")


def _wire_words(part: pd.DataFrame) -> str:
    """The demand's completion error against the wire's, median over paths and engines."""
    def median(prefix):
        values = part[part["predictor"].str.startswith(prefix)]["completion_err_median"]
        return values.median() if values.notna().any() else float("nan")
    d, adu, opened = median("demand"), median("wire-adu"), median("wire-open")
    return (f"Completion-time error, median over paths and engines: demand {d:.0%}, wire ADUs {adu:.0%}, "
            f"wire open loop {opened:.0%}.")


def _paths(paths: list[str]) -> str:
    return ", ".join(paths) if paths else "no path"
