"""The agreement study's part on the suite's applications, measured from the runs a
fidelity study kept (`magnet experiment fidelity --work DIR`): that study replays each
application's whole demand across each target path in both engines (its predictors
demand-tcp, Linux's TCP over linkem, and demand-ns3, ns-3 with the options its
replay.log records), so those are the suite's engine-agreement runs; nothing runs again.

    magnet experiment agreement --suite FIDELITY_WORK [--out DIR]    # into DIR/suite/

Per (application, path), ns-3 against Linux (magnetlib.app_metrics.totals, the same
reader for both engines' traces): mean data-segment size, mean gap, throughput, the
median exchange round trip, the median connection's completion and retransmitted
bytes; beside them, the real application's run-to-run spread over its truth runs (each
engine replayed the demand once, so the replay's own spread is not measured).  A failed
run (its status in runs.csv, or traces that cannot be read) is shown as failed.
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
    row: dict = {"app": app, "path": site}
    engine = {e: next((r for r in group if r.kind == kind), None) for e, kind in ENGINES.items()}
    failed = [e for e, r in engine.items() if r is None or id(r) not in measured]
    truths = [measured[id(r)][1] for r in group if r.kind == "truth" and id(r) in measured]
    row["status"] = "; ".join(f"{NAMES[e]}: {'no run' if engine[e] is None else engine[e].status}"
                              for e in failed) or "ok"
    row["failed"] = ", ".join(NAMES[e] for e in failed)
    for e, r in engine.items():
        values = measured[id(r)][1] if r is not None and id(r) in measured else {}
        for m in (*METRICS, "retrans", "connections", "round_trips"):
            row[f"{m}_{e}"] = values.get(m, np.nan)
    for m in METRICS:
        row[f"{m}_diff_pct"] = 100 * (row[f"{m}_ns3"] / row[f"{m}_tcp"] - 1)
        row[f"{m}_app_spread_pct"] = spread([t[m] for t in truths])
    row["truth_runs"] = len(truths)
    both = [measured[id(engine[e])][0] for e in ENGINES] if not failed else None
    row["completion_err_pct"] = (100 * app_metrics.compare(both[0], both[1])["completion_err_median"]
                                 if both else np.nan)
    diffs = pd.Series({m: abs(row[f"{m}_diff_pct"]) for m in AGREE}).dropna()
    row["worst"] = diffs.idxmax() if len(diffs) else ""
    row["worst_pct"] = diffs.max() if len(diffs) else np.nan
    row["agrees"] = bool(not failed and len(diffs) == len(AGREE) and diffs.max() <= TARGET_PCT)
    return row


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
                     "The suite's applications, ns-3 vs Linux (whole demand replayed once in each); "
                     "bold: beyond 10 %", row_notes=notes)


# ------------------------------------------------------------------ README ---
def section(table: pd.DataFrame, work: Path, ns3_options: str, image: str = "heatmap.png") -> str:
    """The README's section "The suite's applications": what was compared, the count, the
    table, the heat map and the failed runs."""
    h = headline(table)
    within = ", ".join(f"{m} {n}" for m, n in h["within"].items())
    out = ["## The suite's applications", "",
           f"From the runs a fidelity study kept in `{work}`: each application's whole demand "
           "(`magnet demand --all` of its capture on path A) replayed across each target path by "
           f"`magnet replay ns3 {ns3_options}`".rstrip() + " (demand-ns3) and by `magnet replay tcp` (demand-tcp, "
           "Linux's TCP over linkem), once each, measured from both replays' traces by one reader "
           "(magnetlib.app_metrics): the data segments the receivers' devices got (mean size, mean gap "
           "between segments of a connection, bits per second over the run's span, both directions "
           "together), the median **exchange round trip** (per response: from the requester's device "
           "sending the request's last segment to it receiving the answer's first, less the answerer's "
           "time between reading the request and writing the answer; an exchange crossed by a "
           "retransmission is left out, docs/fidelity.md; the ns-3 replay records no ACK and "
           "no TCP state, so both engines are measured from their data segments; *exchanges* counts them, "
           "ns-3 / Linux: a single download has one, before its own queue builds), the median connection's "
           "completion (first byte written to last byte read), and retransmitted bytes (the data the "
           "senders' devices sent beyond what the applications wrote). Each engine ran each cell once: "
           "the replay's own run-to-run spread is unmeasured; *app spread* is the real application's "
           "over its truth runs ((max - min) / median), a scale for the differences, not the replay's.", "",
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
        "app spread % (size/gap/thr/RTT)": ["/".join(_num(r[f"{m}_app_spread_pct"]) for m in AGREE)
                                            for _, r in table.iterrows()],
        "status": [f"**failed ({who})**" if who else "ok" for who in table["failed"]]})
    out += [common.markdown(shown), "", f"![suite heat map]({image})", ""]
    failed = table[table["status"] != "ok"]
    if len(failed):
        out += ["Failed runs:", ""] + [f"* {r.app} on {r.path}: {r.status}" for r in failed.itertuples()] + [""]
    return "\n".join(out)


def _pct(v: float) -> str:
    return "–" if not np.isfinite(v) else f"{v:+.1f}"


def _num(v: float) -> str:
    return "–" if not np.isfinite(v) else f"{v:.0f}"


def _pair(a: float, b: float, fmt: str) -> str:
    return " / ".join("–" if not np.isfinite(v) else fmt.format(v) for v in (a, b))


# -------------------------------------------------------------------- main ---
def main(args) -> int:
    """The suite's part alone: read --suite's runs, write OUT/suite/."""
    from . import fidelity
    work = args.suite
    try:
        runs = kept_runs(work)
    except MagnetError as e:
        common.gate(False, str(e))
    if not any(r.kind in ENGINES.values() for r in runs):
        common.gate(False, f"{work / 'runs.csv'}: no demand-tcp or demand-ns3 run to compare")
    table = cells(runs)
    mine = argparse.Namespace(suite=work, out=Path(args.out) / "suite", argv=args.argv, prog=args.prog)
    results = common.Results("agreement", mine)
    table.to_csv(results.path("suite.csv"), index=False)
    results.figure(heatmap(table), "heatmap")
    body = section(table, work, fidelity.ns3_options(runs))
    path = results.write("Does the simulator agree with the kernel? The suite's applications", body)
    h = headline(table)
    print(f"agreement: {h['agree']} of {h['cells']} suite cells agree within {TARGET_PCT:g} % "
          f"({h['failed']} with a failed run); results in {path.parent}")
    return 0
