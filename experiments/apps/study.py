"""`magnet experiment apps`: the trace library of real applications, made by one command.

Each application of the suite (experiments/apps/, docs/apps.md) runs across `magnet path
--capture` on each of a few paths, both sides captured at every layer; the captures go into
a `magnet library` with the application and the path as catalogue columns, and
`magnet library export-demand --all` writes each run's whole-application demand, ready to
replay in ns-3 or real TCP.  The README has a table per application: per path, the
connections, bytes each way, how long the client ran, and the data segments each direction
put on the wire (size and gap).

    sudo magnet experiment apps --out experiments/results/apps      # about 8 minutes
    sudo magnet experiment apps --quick                               # 3 applications, 2 paths
    sudo magnet experiment apps --apps nginx-bulk,redis-benchmark --paths 2ms-100Mbps,200ms-2Mbps
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from magnet.replay.scenario import Path as NetPath
from magnetlib import knobs
from magnetlib.errors import MagnetError

from .. import common
from . import RECIPES, install

PATHS = ("2ms-100Mbps", "60ms-10Mbps", "200ms-2Mbps")
QUICK_APPS = ("http-python", "redis-benchmark", "h2load-h2")
QUICK_PATHS = ("2ms-100Mbps", "60ms-10Mbps")
PATH_NAME = re.compile(r"(?P<rtt>\d+(?:\.\d+)?ms)-(?P<rate>\d+(?:\.\d+)?[kKMG]bps)")


@dataclass(frozen=True)
class NamedPath:
    name: str
    path: NetPath


def named_path(text: str) -> NamedPath:
    """"60ms-10Mbps": 60 ms RTT (30 ms each way), 10 Mbit/s each way, magnet path's defaults otherwise."""
    m = PATH_NAME.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r}: a path is RTT-RATE, e.g. 60ms-10Mbps")
    rtt, rate = knobs.duration(m.group("rtt")), knobs.rate(m.group("rate"))
    return NamedPath(text, NetPath(rate_bps=rate, delay_ns=rtt // 2, duplex=True))


def options(argv):
    p = common.parser("apps", __doc__)
    p.add_argument("--apps", help=f"applications, comma-separated (default all: {', '.join(RECIPES)})")
    p.add_argument("--paths", help=f"paths RTT-RATE, comma-separated (default {','.join(PATHS)})")
    p.add_argument("--keep-captures", action="store_true",
                   help="keep the captures in OUT/captures (default: only the library holds them)")
    args = common.parse(p, argv)
    apps = args.apps.split(",") if args.apps else list(QUICK_APPS if args.quick else RECIPES)
    unknown = [a for a in apps if a not in RECIPES]
    if unknown:
        p.error(f"--apps: unknown application {unknown[0]!r} (one of {', '.join(RECIPES)})")
    try:
        paths = [named_path(t) for t in (args.paths.split(",") if args.paths else
                                         QUICK_PATHS if args.quick else PATHS)]
    except ValueError as e:
        p.error(f"--paths: {e}")
    args.apps, args.paths = apps, ",".join(p.name for p in paths)
    return args, paths


def prerequisites(apps: list[str]) -> None:
    """Root, the emulated path, the BPF capture and the applications (installed if missing)."""
    from magnet.replay import linkem, wire
    common.gate(linkem.unavailable() is None, f"apps: {linkem.unavailable()}")
    common.gate(wire.bpf_unavailable() is None, f"apps: the capture: {wire.bpf_unavailable()}")
    recipes = [RECIPES[a] for a in apps]
    try:
        install.install(recipes, say=common.progress_note)
    except RuntimeError as e:
        common.gate(False, f"apps: {e}")
    for recipe in recipes:
        common.gate(recipe.missing() is None, f"apps: {recipe.missing()}")


# --------------------------------------------------------------- one run ---
def capture_one(recipe, where: NamedPath, out: Path) -> dict:
    """Run `recipe` across the path with capture; the row of the results (its traces kept)."""
    from . import run
    name = f"{recipe.name}.{where.name}"
    work = out / "work" / name
    shutil.rmtree(work, ignore_errors=True)
    prefix = out / "captures" / name
    prefix.parent.mkdir(parents=True, exist_ok=True)
    row = {"app": recipe.name, "kind": recipe.kind, "path": where.name}
    try:
        done = run.run(recipe, where.path, work, where.name, capture=prefix)
    except MagnetError as e:
        row["status"] = str(e)
        return row
    finally:
        keep_logs(work, out / "logs" / name)
    row.update(status="ok", rtt_ms=round(done.rtt_ms, 2), client_s=round(done.seconds, 3),
               work=" ".join(f"{k}={v}" for k, v in done.work.items() if not isinstance(v, dict)),
               versions=" ".join(f"{k}={v}" for k, v in done.versions.items()))
    for side, trace in done.traces.items():
        row[f"trace_{side}"] = str(trace)
    return row


def keep_logs(work: Path, logs: Path) -> None:
    """The run's logs (what magnet path applied, the client's output) kept; its data removed."""
    logs.mkdir(parents=True, exist_ok=True)
    for name in ("path.log", "client.out", "client.err"):
        if (work / name).exists():
            shutil.copy(work / name, logs / name)
    shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------- the wire ---
def wire(trace: Path) -> dict:
    """The data segments a side put on its device (DEV_SEND with payload, retransmissions
    included): count, bytes, mean size, median and p90 gap between consecutive ones (over
    all its connections)."""
    import magnetlib
    from magnetlib.format import Event
    with magnetlib.open(trace) as t:
        pos = t.select([Event.DEV_SEND])
        size = t.column_at("size", pos).astype(np.int64)
        ns = t.ns_at(pos)
    data = size > 0
    size, ns = size[data], np.sort(ns[data])
    gaps = np.diff(ns) / 1e6
    return {"segments": int(len(size)), "wire_bytes": int(size.sum()),
            "mean_size": float(size.mean()) if len(size) else np.nan,
            "gap_p50_ms": float(np.median(gaps)) if len(gaps) else np.nan,
            "gap_p90_ms": float(np.percentile(gaps, 90)) if len(gaps) else np.nan}


def wire_columns(row: dict) -> dict:
    """Each direction's wire: the client's device sends are client->server, the server's the reverse."""
    out = {}
    for side, way in (("client", "c2s"), ("server", "s2c")):
        trace = row.get(f"trace_{side}")
        if trace:
            out.update({f"{way}_{k}": v for k, v in wire(Path(trace)).items()})
    return out


# -------------------------------------------------------- the library ---
def make_library(rows: list[dict], out: Path):
    """The captures of the runs that worked in a fresh library, and their whole-application
    demands (magnet library export-demand --all --format parquet); the demands' index."""
    import pandas as pd
    from magnetlib.library import Library, export
    shutil.rmtree(out / "library", ignore_errors=True)
    shutil.rmtree(out / "demands", ignore_errors=True)
    lib = Library.create(out / "library")
    for row in rows:
        if row["status"] == "ok":
            lib.add([row["trace_client"], row["trace_server"]], application=row["app"],
                    network_path=row["path"])
    done = export.export_app_demand(lib.layout, str(out / "demands"), fmt="parquet")
    index = pd.read_csv(out / "demands" / "index.csv")
    notes = [note.replace(f"{out / 'captures'}/", "") for note in done.notes]
    return lib, index.rename(columns={"application": "app"}), notes


def results_frame(rows: list[dict], index):
    import pandas as pd
    frame = pd.DataFrame(rows)
    demand = index[["app", "path", "file", "connections", "opened_by_server", "client_bytes",
                    "server_bytes", "duration_s"]].rename(columns={"duration_s": "demand_s",
                                                                   "file": "demand"})
    frame = frame.merge(demand, on=["app", "path"], how="left")
    order = ["app", "kind", "path", "status", "rtt_ms", "client_s", "connections", "opened_by_server",
             "client_bytes", "server_bytes", "demand_s", "demand"]
    wires = [c for c in frame.columns if c.startswith(("c2s_", "s2c_"))]
    return frame[order + wires + ["work", "versions"]]


# ------------------------------------------------------------ write-up ---
def app_table(frame) -> str:
    """Per path: what the application did and what each direction put on the wire."""
    import pandas as pd
    rows = []
    for r in frame.itertuples(index=False):
        if r.status != "ok":
            rows.append({"path": r.path, "RTT ms": "–", "client s": "failed: " + r.status})
            continue
        rows.append({
            "path": r.path, "RTT ms": f"{r.rtt_ms:.1f}", "client s": f"{r.client_s:.2f}",
            "connections": f"{r.connections}" + (f" ({r.opened_by_server} by server)" if r.opened_by_server else ""),
            "bytes c→s": f"{r.client_bytes:,}", "bytes s→c": f"{r.server_bytes:,}",
            "c→s segments: n, mean B, gap p50/p90 ms": _wire_cell(r, "c2s"),
            "s→c segments: n, mean B, gap p50/p90 ms": _wire_cell(r, "s2c")})
    return common.markdown(pd.DataFrame(rows))


def _wire_cell(r, way: str) -> str:
    n = getattr(r, f"{way}_segments")
    if not n:
        return "0"
    if n == 1:
        return f"1, {getattr(r, f'{way}_mean_size'):.0f}, –"
    return (f"{n:,}, {getattr(r, f'{way}_mean_size'):.0f}, {getattr(r, f'{way}_gap_p50_ms'):.3g} / "
            f"{getattr(r, f'{way}_gap_p90_ms'):.3g}")


def write_up(args, frame, lib, notes: list[str], out: Path, load: list[float]) -> str:
    from . import RECIPES
    parts = [f"Each application of the suite ran once across `magnet path --capture` on each path "
             f"({args.paths.replace(',', ', ')}: RTT-RATE, the rate each way (duplex), "
             "magnet path's 100-packet drop-tail queue, CUBIC), both sides captured at every layer "
             "with extended records. The captures went into a `magnet library` with the application "
             "and the path as columns (`library/`), and `magnet library export-demand --all` wrote each "
             "run's whole-application demand (`demands/`, Parquet, `demands/index.csv`).", "",
             "Columns: *RTT* as magnet path measured it before the programs started; *client s* how long "
             "the client ran; *connections* and *bytes* from the whole-application demand (what each "
             "side's application wrote); *segments* the data segments each side put on its device "
             "(TCP payload, retransmissions included), their mean size and the gap between consecutive "
             "ones over all connections of that direction (median / p90).", "",
             f"One run per application and path, on a shared machine (load average {load[0]:.1f} at the "
             f"start, {load[1]:.1f} at the end): durations and gaps carry its noise. The work each "
             "application does is fixed: its connections and bytes are the same on every path.", ""]
    for app in args.apps:
        recipe = RECIPES[app]
        rows = frame[frame["app"] == app]
        versions = rows["versions"].dropna()
        parts += [f"### {app} ({recipe.kind})", "", recipe.summary + ".",
                  f"Versions: {versions.iloc[0] if len(versions) else 'not run'}.", "",
                  app_table(rows), ""]
    parts += library_section(lib, out, notes)
    return "\n".join(parts)


def library_section(lib, out: Path, notes: list[str]) -> list[str]:
    size = sum(f.stat().st_size for f in (out / "library").rglob("*") if f.is_file())
    traces = lib.traces()
    lines = ["## The library", "",
             f"`library/`: {len(traces)} traces ({int(traces['records'].sum()):,} records, "
             f"{size / 2**20:.1f} MiB of Parquet), its catalogue in `catalogue.csv`; "
             f"`demands/`: one whole-application demand per run, ready for `magnet replay ns3 FILE` "
             "or `magnet replay tcp FILE` (`demands/index.csv` says which is which). The results "
             "committed with magnet leave `library/` out for its size (`.gitignore`): the command "
             "at the top makes it again.", "",
             "```sh",
             "magnet library query library \"SELECT application, path, host, count(*) AS streams, "
             "sum(bytes) AS bytes FROM streams GROUP BY ALL ORDER BY ALL\"",
             "magnet library export-demand library -o set/ --all --where \"path = '200ms-2Mbps'\"",
             "```", ""]
    if notes:
        lines += ["Notes from building the demands (captures named APP.PATH):", ""]
        lines += [f"* {n}" for n in notes] + [""]
    return lines


# ------------------------------------------------------------------ main ---
def main(argv: list[str] | None = None) -> int:
    from magnet.replay.path import Interrupted
    args, paths = options(argv)
    prerequisites(args.apps)
    results = common.Results("apps", args)
    out = results.dir.resolve()
    plan = [(RECIPES[a], p) for p in paths for a in args.apps]
    rows, load = [], [os.getloadavg()[0]]
    try:
        for recipe, where in common.progress(plan, "apps"):
            row = capture_one(recipe, where, out)
            if row["status"] != "ok":
                common.progress_note(f"apps: {recipe.name} on {where.name}: {row['status']}")
            rows.append(row | wire_columns(row))
        load.append(os.getloadavg()[0])
        lib, index, notes = make_library(rows, out)
    except (Interrupted, KeyboardInterrupt):
        print("magnet experiment apps: interrupted (no results written)", file=sys.stderr)
        return 130
    finally:
        if not args.keep_captures:
            shutil.rmtree(out / "captures", ignore_errors=True)
        shutil.rmtree(out / "work", ignore_errors=True)
    frame = results_frame(rows, index)
    results.table("apps", frame)
    catalogue = lib.traces()[["trace", "host", "application", "path", "records", "streams",
                              "sock_send_bytes", "sock_recv_bytes", "dev_send_bytes", "lost"]]
    results.table("catalogue", catalogue)
    results.files += ["demands/index.csv", "logs/"]
    results.write("The trace library of real applications", write_up(args, frame, lib, notes, out, load))
    failed = frame[frame["status"] != "ok"]
    for r in failed.itertuples(index=False):
        print(f"magnet experiment apps: {r.app} on {r.path} failed: {r.status}", file=sys.stderr)
    return 1 if len(failed) else 0
