"""The format's one description agrees with the C header, the numpy dtypes and the spec."""
import subprocess

import numpy as np
import pytest

from magnetlib import codegen
from magnetlib import format as fmt

from .conftest import REPO, require_tool

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

HEADER = REPO / "capture" / "magnet_format.h"


def test_sizes():
    assert fmt.record_dtype(24).itemsize == 24
    assert fmt.record_dtype(144).itemsize == 144
    assert fmt.SYSINFO == 0x01234567 and fmt.SYSINFO_SWAPPED == 0x67452301


def test_dtype_byte_orders_share_layout():
    little, big = fmt.record_dtype(144, "<"), fmt.record_dtype(144, ">")
    assert little.names == big.names
    assert [little.fields[n][1] for n in little.names] == [big.fields[n][1] for n in big.names]


def test_generated_header_is_current():
    assert HEADER.read_text() == codegen.header(), "run `make header` and commit the result"


@pytest.mark.parametrize("compiler,std,suffix", [("gcc", "-std=c11", ".c"), ("g++", "-std=c++17", ".cc")])
def test_c_layout_matches_numpy(tmp_path, compiler, std, suffix):
    """Compile the header and compare every offset and size with the numpy dtype."""
    require_tool(compiler)
    dtype = fmt.record_dtype(144)
    lines = ['#include "magnet_format.h"', "#include <stdio.h>", "#include <stddef.h>",
             "int main(void) {"]
    for f in fmt.CORE_FIELDS:
        lines.append(f'printf("{f.name} %zu %zu\\n", offsetof(struct magnet_record, core.{f.name}), '
                     f"sizeof(((struct magnet_record *)0)->core.{f.name}));")
    for f in fmt.EXT_FIELDS:
        lines.append(f'printf("{f.name} %zu %zu\\n", offsetof(struct magnet_record, ext.{f.name}), '
                     f"sizeof(((struct magnet_record *)0)->ext.{f.name}));")
    lines += ['printf("record %zu 0\\n", sizeof(struct magnet_record));', "return 0; }"]
    src = tmp_path / f"layout{suffix}"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([compiler, std, "-Wall", "-Werror", f"-I{HEADER.parent}", str(src), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    seen = {name: (int(off), int(size)) for name, off, size in (l.split() for l in out if l)}
    assert seen.pop("record")[0] == dtype.itemsize
    for name in dtype.names:
        sub, offset = dtype.fields[name][:2]
        assert seen[name] == (offset, sub.itemsize), name


def test_spec_document_names_everything():
    """docs/trace-format.md describes every event, key, clock and field of format.toml."""
    doc = (REPO / "docs" / "trace-format.md").read_text()
    names = [e["name"] for e in fmt.SPEC["event"]] + [m["name"] for m in fmt.SPEC["meta"]]
    names += [c["name"] for c in fmt.SPEC["clock"]] + [v["name"] for v in fmt.SPEC["ext_valid"]]
    names += [f.name for f in fmt.CORE_FIELDS + fmt.EXT_FIELDS]
    missing = [n for n in names if f"`{n}`" not in doc]
    assert not missing, f"docs/trace-format.md does not describe {missing}"
    for f in fmt.EXT_FIELDS:
        assert f"| {f.offset} | `{f.name}` |" in doc, f"offset of {f.name} in the spec"


def test_event_codes_unique_and_table_covers_them():
    codes = [e["code"] for e in fmt.SPEC["event"]]
    assert len(codes) == len(set(codes))
    for ev in fmt.Event:
        if ev != fmt.Event.SYSINFO:
            assert fmt.INDEX_EVENT[fmt.EVENT_INDEX[ev]] == ev
    assert (fmt.EVENT_INDEX >= 0).sum() == len(fmt.Event) - 1
    bits = [e["bit"] for e in fmt.SPEC["event"] if e["bit"]]
    assert len(bits) == len(set(bits))
    assert np.all(np.array(bits) < 64)
