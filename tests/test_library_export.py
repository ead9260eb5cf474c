"""Exports: demand sets the replayers read back, Tmix connection vectors a Tmix reader accepts."""
import importlib.util

import numpy as np
import pandas as pd
import pytest

import magnetlib
from magnetlib import demand

from .conftest import assert_clean_error, require
from .librarygen import MIDNIGHT_NS, make_trace

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    for name in ("pyarrow", "duckdb"):
        require(importlib.util.find_spec(name) is not None, f"{name} is not installed (pip install .[library])")
    from magnetlib.library import Library
    d = tmp_path_factory.mktemp("mglib-export")
    paths = {"alpha": make_trace(d / "a.magnet"),
             "beta": make_trace(d / "b.magnet", host="beta", ext=True, wall_ns=MIDNIGHT_NS + 5 * 10**9,
                                streams=((0x21, "ftp-paper"),), seed=2)}
    library = Library.create(d / "lib")
    library.add([paths["alpha"]], application="web")
    library.add([paths["beta"]], application="ftp")
    library.sources = paths
    return library


@pytest.mark.parametrize("fmt", ["csv", "parquet", "magnet"])
def test_demand_set_is_what_magnet_demand_extracts(lib, tmp_path, fmt):
    from magnetlib.library import export
    out = tmp_path / "set"
    done = export.export_demand(lib.layout, str(out), fmt=fmt)
    index = pd.read_csv(out / "index.csv")
    assert done.streams == len(index) == 3 and set(index["application"]) == {"web", "ftp"}
    for _, row in index.iterrows():
        host = row["host"]
        trace = magnetlib.open(lib.sources[host])
        want = demand.extract(trace, int(row["sockid"]))
        got = demand.read_demand(out / row["file"])
        assert np.array_equal(got.time_ns, want.time_ns) and np.array_equal(got.size, want.size)
        assert np.array_equal(got.direction, want.direction)
        assert (row["calls"], row["bytes"], row["start_ns"]) == (len(want), want.total_bytes, want.start_ns)
        assert row["start_time"].startswith("2023-11-1")


def test_demand_set_selection_and_refusals(lib, tmp_path, magnet):
    out = tmp_path / "ftp"
    proc = magnet("library", "export-demand", lib.path, "-o", out, "--where", "application = 'ftp'", check=True)
    assert "1 streams" in proc.stderr_text
    assert list(pd.read_csv(out / "index.csv")["sockid"]) == [0x21]
    assert_clean_error(magnet("library", "export-demand", lib.path, "-o", out), "not an empty directory")
    assert_clean_error(magnet("library", "export-demand", lib.path, "-o", tmp_path / "x", "--where", "nope = 1"),
                       "query failed")
    dev = tmp_path / "dev"
    magnet("library", "export-demand", lib.path, "-o", dev, "--layer", "dev", check=True)
    index = pd.read_csv(dev / "index.csv")
    trace = magnetlib.open(lib.sources["alpha"])
    row = index[index["sockid"] == 0x11].iloc[0]
    assert row["calls"] == len(demand.extract(trace, 0x11, layer="dev"))


def read_tmix(path):
    """Connection vectors read with the rules of ns-2's Tmix reader (original format):
    SEQ: every ADU but the first follows a 't' line; CONC: no two 'c>' (or 'c<') without
    a 't>' ('t<') between them and no two waits of one side in a row."""
    vectors, cv, state = [], None, None
    for line in open(path):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        word, *rest = line.split()
        if word in ("SEQ", "CONC"):
            cv = {"type": word, "head": [int(x) for x in rest], "adus": [], "waits": [], "lines": {}}
            vectors.append(cv)
            state = "TB" if word == "SEQ" else None
            continue
        value = float(rest[0]) if word == "l" else int(rest[0])
        if word in ("w", "r", "l", "m"):
            cv["lines"][word] = [float(x) for x in rest]
        elif cv["type"] == "SEQ":
            if word in (">", "<"):
                assert state in ("TA", "TB"), f"ADU {word} after an ADU without a wait: {line}"
                cv["adus"].append((word, value))
                state = "A" if word == ">" else "B"
            else:
                assert word == "t" and state in ("A", "B"), f"wait after a wait: {line}"
                cv["waits"].append(value)
                state = "TA" if state == "A" else "TB"
        else:
            assert (word, state) not in (("c>", "A"), ("c<", "B"), ("t>", "TA"), ("t<", "TB")), line
            state = {"c>": "A", "c<": "B", "t>": "TA", "t<": "TB"}[word]
            (cv["adus"] if word[0] == "c" else cv["waits"]).append((word, value))
    return vectors


def test_tmix_vectors_are_the_calls(lib, tmp_path):
    from magnetlib.library import export
    out = tmp_path / "all.cvec"
    done = export.export_tmix(lib.layout, str(out))
    vectors = read_tmix(out)
    assert done.streams == len(vectors) == 3 and not done.notes
    starts = [v["head"][0] for v in vectors]
    assert starts == sorted(starts) and starts[0] == 0
    streams = lib.streams().set_index("sockid")
    for v in vectors:
        sent = sum(s for d, s in v["adus"] if d == ">")
        received = sum(s for d, s in v["adus"] if d == "<")
        matches = streams[(streams["sock_send_bytes"] == sent) & (streams["sock_recv_bytes"] == received)]
        assert len(matches) == 1
        calls = matches.iloc[0]["sock_send_records"] + matches.iloc[0]["sock_recv_records"]
        assert len(v["adus"]) == calls and len(v["waits"]) == calls - 1
    beta = [v for v in vectors if v["lines"].get("m")][0]
    assert beta["lines"]["w"] == [131072, 65536] and beta["lines"]["r"] == [200] and beta["lines"]["m"] == [1448, 1448]
    # ftp-paper: 3284-byte writes every 0.124 s, with the replies read in between
    assert {s for d, s in beta["adus"] if d == ">"} == {3284}
    want = demand.extract(magnetlib.open(lib.sources["beta"]), 0x21)
    assert [s for _, s in beta["adus"]] == list(want.size)
    assert beta["waits"] == list(np.diff(want.time_ns) // 1000)
    assert beta["head"][0] == 5 * 10**6 + 1_500_000       # 5 s after midnight; alpha started 1.5 s before


def test_tmix_adu_merging_and_concurrent_form(lib, tmp_path):
    from magnetlib.library import export
    merged = tmp_path / "merged.cvec"
    export.export_tmix(lib.layout, str(merged), where="host = 'alpha'", adu_gap_s=1.0)
    vectors = read_tmix(merged)
    one_way = [v for v in vectors if all(d == ">" for d, _ in v["adus"])]
    assert one_way and all(len(v["adus"]) == 1 for v in one_way)     # one long send ADU
    conc = tmp_path / "conc.cvec"
    export.export_tmix(lib.layout, str(conc), where="host = 'alpha'", concurrent=True)
    cv = [v for v in read_tmix(conc) if v["type"] == "CONC"]
    both = [v for v in cv if {w for w, _ in v["adus"]} == {"c>", "c<"}][0]
    n_init, n_acc = both["head"][1], both["head"][2]
    assert n_init == sum(1 for w, _ in both["adus"] if w == "c>") and n_acc == sum(1 for w, _ in both["adus"] if w == "c<")
