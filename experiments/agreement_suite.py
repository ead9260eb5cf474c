"""The agreement study's part on the suite's applications, measured from the runs a
fidelity study kept (`magnet experiment fidelity --work DIR`): that study replays each
application's whole demand across each target path in both engines (its predictors
demand-tcp, Linux's TCP over linkem, and demand-ns3, ns-3 with the options its
replay.log records), so those are the suite's engine-agreement runs; nothing runs again.

    magnet experiment agreement --suite FIDELITY_WORK [--suite FIDELITY_WORK ...] [--out DIR]
                                                                     # into DIR/suite/

Per (application, path), ns-3 against Linux (magnetlib.app_metrics.totals, the same
reader for both engines' traces): mean data-segment size, mean gap, throughput, the
median exchange round trip, the median connection's completion and retransmitted
bytes; beside them, the real application's run-to-run spread over its truth runs.  Each
study replays each demand once per engine; with several studies (each captured its own
source) a cell's values are the medians of its runs, with each engine's own spread.  A
failed run (its status in runs.csv, or traces that cannot be read) is shown as failed;
a cell is failed for an engine when none of its runs could be measured.  The README names
the host lags each study recorded (host-lags.json in its --work: measured at its start,
given, or the constants) beside the options its ns-3 replays' logs record.
"""
from __future__ import annotations

import argparse
import types
from pathlib import Path

import numpy as np
import pandas as pd

from magnetlib import app_metrics
from magnetlib.errors import MagnetError

from . import common
from .agreement import TARGET_PCT, draw_grid

ENGINES = {"ns3": "demand-ns3", "tcp": "demand-tcp"}
NAMES = {"ns3": "ns-3", "tcp": "Linux"}
AGREE = ("size", "gap", "throughput", "RTT")          # the cell agrees when these are within the target
METRICS = (*AGREE, "completion")


# ---------------------------------------------------------------- reading ---
def kept_runs(work: Path) -> list:
    """The demand replays and truth runs a fidelity study left in `work` (its runs.csv)."""
    from . import fidelity
    frame = fidelity.study_runs(work)
    wanted = types.SimpleNamespace(apps=set(frame["app"]), paths=set(frame["path"]),
                                   predictors=set(ENGINES.values()))
    return [r for r in fidelity.kept(wanted, work) if r.kind != "source"]


def profiles(runs: list) -> dict:
    """Each ok run's totals (app_metrics.totals), by id; a run whose traces cannot be read
    gets that as its status."""
    out = {}
    for run in runs:
        if run.status != "ok":
            continue
        try:
            p = app_metrics.profile(*map(str, run.traces), source=run.label())
        except (MagnetError, OSError) as e:
            run.status = f"its traces: {e}"
            continue
        out[id(run)] = (p, app_metrics.totals(p))
    return out


# ---------------------------------------------------------------- the table ---
def cells(runs: list) -> pd.DataFrame:
    """One row per (application, path), in the study's order."""
    measured = profiles(runs)
    rows = []
    for key in dict.fromkeys((r.app, r.site) for r in runs):
        group = [r for r in runs if (r.app, r.site) == key]
        rows.append(cell(*key, group, measured))
    return pd.DataFrame(rows)


def cell(app: str, site: str, group: list, measured: dict) -> dict:
    """An (application, path) cell: each engine's metrics, the medians of its runs (one per
    study read), and ns-3 against Linux on them."""
    row: dict = {"app": app, "path": site}
    engine = {e: [r for r in group if r.kind == kind] for e, kind in ENGINES.items()}
    ok = {e: [r for r in rs if id(r) in measured] for e, rs in engine.items()}
    failed = [e for e in ENGINES if not ok[e]]
    truths = [measured[id(r)][1] for r in group if r.kind == "truth" and id(r) in measured]
    row["status"] = "; ".join([f"{NAMES[e]}: no run" for e, rs in engine.items() if not rs] +
                              [f"{NAMES[e]}: {r.status}" for e, rs in engine.items() for r in rs
                               if id(r) not in measured]) or "ok"
    row["failed"] = ", ".join(NAMES[e] for e in failed)
    for e in ENGINES:
        row[f"runs_{e}"] = len(ok[e])
        for m in (*METRICS, "retrans", "connections", "round_trips"):
            values = [measured[id(r)][1].get(m, np.nan) for r in ok[e]]
            row[f"{m}_{e}"] = float(np.nanmedian(values)) if np.isfinite(values).any() else np.nan
            if m in METRICS:
                row[f"{m}_{e}_spread_pct"] = spread(values)
    for m in METRICS:
        row[f"{m}_diff_pct"] = 100 * (row[f"{m}_ns3"] / row[f"{m}_tcp"] - 1)
        row[f"{m}_app_spread_pct"] = spread([t[m] for t in truths])
    row["truth_runs"] = len(truths)
    row["completion_err_pct"] = completion_error(ok, measured)
    diffs = pd.Series({m: abs(row[f"{m}_diff_pct"]) for m in AGREE}).dropna()
    row["worst"] = diffs.idxmax() if len(diffs) else ""
    row["worst_pct"] = diffs.max() if len(diffs) else np.nan
    row["agrees"] = bool(not failed and len(diffs) == len(AGREE) and diffs.max() <= TARGET_PCT)
    return row


def completion_error(ok: dict, measured: dict) -> float:
    """The median connection's completion error, ns-3 against Linux, paired within each
    study (the same source demand), the median over the studies; NaN without a pair."""
    def study(r):
        return r.dir.parents[2]                  # WORK/app/path/predictor
    linux = {study(r): r for r in ok["tcp"]}
    errors = [app_metrics.compare(measured[id(r)][0], measured[id(linux[study(r)])][0])["completion_err_median"]
              for r in ok["ns3"] if study(r) in linux]
    return 100 * float(np.median(errors)) if errors else np.nan


def spread(values: list[float]) -> float:
    """(max - min) / median in %, over at least two finite values (else NaN)."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if len(v) < 2 or np.median(v) == 0:
        return np.nan
    return float(100 * (v.max() - v.min()) / np.median(v))


def headline(table: pd.DataFrame) -> dict:
    ok = table[table["status"] == "ok"]
    within = {m: int((ok[f"{m}_diff_pct"].abs() <= TARGET_PCT).sum()) for m in AGREE}
    worst = ok.sort_values("worst_pct", ascending=False).head(3)
    return {"cells": len(table), "measured": len(ok), "failed": len(table) - len(ok),
            "agree": int(table["agrees"].sum()), "within": within,
            "worst": "; ".join(f"{r.app} on {r.path}: {r.worst} {r[f'{r.worst}_diff_pct']:+.1f} %"
                               for _, r in worst.iterrows() if r.worst)}


# ----------------------------------------------------------------- figures ---
def heatmap(table: pd.DataFrame):
    """ns-3 vs Linux per (application, path) and metric; a failed cell's row says which run failed."""
    grid = table[[f"{m}_diff_pct" for m in METRICS]].to_numpy(float)
    notes = {i: f"failed: {who}" for i, who in enumerate(table["failed"]) if who}
    return draw_grid(grid, [f"{a} · {p}" for a, p in zip(table["app"], table["path"])], list(METRICS),
                     "The suite's applications, ns-3 vs Linux (whole demand; medians where several runs); "
                     "bold: beyond 10 %", row_notes=notes)


# ------------------------------------------------------------------ README ---
def section(table: pd.DataFrame, works: list[Path], ns3_options: str, image: str = "heatmap.png",
            lags: dict | None = None, seeds: dict | None = None) -> str:
    """The README's section "The suite's applications": what was compared, the count, the
    table, the heat map and the failed runs."""
    h = headline(table)
    within = ", ".join(f"{m} {n}" for m, n in h["within"].items())
    out = ["## The suite's applications", "",
           f"From the runs {_studies(works)} kept: each application's whole demand "
           "(`magnet demand --all` of its capture on path A) replayed across each target path by "
           f"`magnet replay ns3 {ns3_options}`".rstrip() + " (demand-ns3) and by `magnet replay tcp` (demand-tcp, "
           "Linux's TCP over linkem), once each per study, measured from both replays' traces by one reader "
           "(magnetlib.app_metrics): the data segments the receivers' devices got (mean size, mean gap "
           "between segments of a connection, bits per second over the run's span, both directions "
           "together), the median **exchange round trip** (per response: from the requester's device "
           "sending the request's last segment to it receiving the answer's first, less the answerer's "
           "time between reading the request and writing the answer; an exchange crossed by a "
           "retransmission is left out, docs/fidelity.md; the ns-3 replay records no ACK and "
           "no TCP state, so both engines are measured from their data segments; *exchanges* counts them, "
           "ns-3 / Linux: a single download has one, before its own queue builds), the median connection's "
           "completion (first byte written to last byte read), and retransmitted bytes (the data the "
           "senders' devices sent beyond what the applications wrote). Each study captured its own source "
           "and replayed its demand once in each engine; where several studies hold a cell (*runs*, ns-3 / "
           "Linux), its values are the medians of its runs and *replay spread* is each engine's own "
           "((max - min) / median, of the cell's worst metric): ns-3 is deterministic, so its spread is the "
           "sources' and the cross traffic's phase against them. *app spread* is the real application's over "
           "its truth runs, a scale for the differences.", "", *lags_lines(lags or {}), *seeds_lines(seeds or {}),
           f"**{h['agree']} of {h['cells']} (application, path) cells agree within {TARGET_PCT:g} %** on "
           f"size, gap, throughput and RTT together; {h['failed']} cell(s) have a failed run and are not "
           f"measured. Of the {h['measured']} measured, within {TARGET_PCT:g} % by metric: {within}. "
           f"The worst: {h['worst'] or 'none'}.", ""]
    shown = pd.DataFrame({
        "app": table["app"], "path": table["path"],
        **{f"{m} %": table[f"{m}_diff_pct"].map(_pct) for m in METRICS},
        "RTT ms ns-3 / Linux": [_pair(a, b, "{:.1f}") for a, b in zip(table["RTT_ns3"], table["RTT_tcp"])],
        "exchanges": [_pair(a, b, "{:.0f}") for a, b in zip(table["round_trips_ns3"], table["round_trips_tcp"])],
        "retrans B ns-3 / Linux": [_pair(a, b, "{:.0f}") for a, b in zip(table["retrans_ns3"], table["retrans_tcp"])],
        "runs": [_pair(a, b, "{:.0f}") for a, b in zip(table["runs_ns3"], table["runs_tcp"])],
        "replay spread % ns-3 / Linux": [_pair(r.get(f"{r.worst}_ns3_spread_pct", np.nan),
                                               r.get(f"{r.worst}_tcp_spread_pct", np.nan), "{:.0f}")
                                         for _, r in table.iterrows()],
        "app spread % (size/gap/thr/RTT)": ["/".join(_num(r[f"{m}_app_spread_pct"]) for m in AGREE)
                                            for _, r in table.iterrows()],
        "status": [f"**failed ({who})**" if who else "ok" for who in table["failed"]]})
    out += [common.markdown(shown), "", f"![suite heat map]({image})", ""]
    failed = table[table["status"] != "ok"]
    if len(failed):
        out += ["Failed runs:", ""] + [f"* {r.app} on {r.path}: {r.status}" for r in failed.itertuples()] + [""]
    return "\n".join(out)


def lags_lines(lags: dict) -> list[str]:
    """Per study: the host lags it recorded (its ns-3 replays ran with them; a --rerun too), or
    that it recorded none (its replays ran with the options above, the constants of its day)."""
    def line(work, rec):
        if rec is None:
            return (f"`{work}` recorded no host lags (made before studies measured them): its ns-3 replays "
                    "ran with the options above, experiments/common.py's constants")
        return (f"`{work}`: ACK lag {rec.ack_lag_ns / 1000:g} us, reply lag {rec.reply_lag_ns / 1000:g} us, "
                f"reader wake-up {rec.reader_wakeup_ns / 1000:g} us, {rec.source}"
                + (f" ({rec.how})" if rec.how else ""))
    if not lags:
        return []
    return ["The host lags ns-3's Linux profile ran with, as each study recorded them (host-lags.json in its "
            "--work; a --rerun replays with the same): " + "; ".join(line(w, l) for w, l in lags.items()) + ".",
            ""]


def _pct(v: float) -> str:
    return "–" if not np.isfinite(v) else f"{v:+.1f}"


def _num(v: float) -> str:
    return "–" if not np.isfinite(v) else f"{v:.0f}"


def _pair(a: float, b: float, fmt: str) -> str:
    return " / ".join("–" if not np.isfinite(v) else fmt.format(v) for v in (a, b))


# -------------------------------------------------------------------- main ---
def seeds_lines(seeds: dict) -> list[str]:
    """Per study: the seed its ns-3 replays had (`--seed`: ns-3's draws of its loss and of its
    bulk flows' starts), and whether the studies sampled ns-3 alike."""
    if not seeds:
        return []
    same = len(seeds) > 1 and len(set(seeds.values())) == 1
    return ["The seed of each study's ns-3 replays: " + "; ".join(f"`{w}` {s}" for w, s in seeds.items()) + "."
            + (" The same in every study: where the studies' demands are alike, ns-3's runs of a cell are one "
               "sample repeated while Linux's are independent." if same else ""), ""]


def _studies(works: list[Path]) -> str:
    if len(works) == 1:
        return f"a fidelity study (`{works[0]}`)"
    return f"{len(works)} fidelity studies (" + ", ".join(f"`{w}`" for w in works) + ")"


def main(args) -> int:
    """The suite's part alone: read each --suite study's runs, write OUT/suite/."""
    from . import fidelity
    works = args.suite
    runs, seeds = [], {}
    for work in works:
        try:
            found = kept_runs(work)
            seeds[work] = fidelity.ns3_seed(found)
        except MagnetError as e:
            common.gate(False, str(e))
        if not any(r.kind in ENGINES.values() for r in found):
            common.gate(False, f"{work / 'runs.csv'}: no demand-tcp or demand-ns3 run to compare")
        runs += found
    table = cells(runs)
    try:
        lags = {work: common.HostLags.read(work) for work in works}
    except MagnetError as e:
        common.gate(False, str(e))
    mine = argparse.Namespace(suite=works, out=Path(args.out) / "suite", argv=args.argv, prog=args.prog)
    results = common.Results("agreement", mine)
    table.to_csv(results.path("suite.csv"), index=False)
    results.figure(heatmap(table), "heatmap")
    body = section(table, works, fidelity.ns3_options(runs, fidelity.NS3_OPTIONS[1:]), lags=lags, seeds=seeds)
    path = results.write("Does the simulator agree with the kernel? The suite's applications", body)
    h = headline(table)
    print(f"agreement: {h['agree']} of {h['cells']} suite cells agree within {TARGET_PCT:g} % "
          f"({h['failed']} with a failed run); results in {path.parent}")
    return 0
