"""Generate capture/magnet_format.h from format.toml.

    python -m magnetlib.codegen [OUTPUT]      (default: print to stdout)

The header compiles in BPF programs (after vmlinux.h), in C and in C++.
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import format as fmt

C_TYPES = {"u8": "__u8", "u16": "__u16", "u32": "__u32", "u64": "__u64", "i32": "__s32"}


def _struct(name: str, fields: list[fmt.Field], base: int) -> list[str]:
    lines = [f"struct {name} {{"]
    for f in fields:
        array = f"[{f.count}]" if f.count > 1 else ""
        lines.append(f"\t{C_TYPES[f.scalar]} {f.name}{array};\t/* {f.doc} */")
    lines.append("};")
    for f in fields:
        lines.append(f"MAGNET_ASSERT(__builtin_offsetof(struct {name}, {f.name}) == {f.offset - base});")
    return lines


def _enum(name: str, prefix: str, members: list[tuple[str, int, str]]) -> list[str]:
    lines = [f"enum {name} {{"]
    lines += [f"\t{prefix}{m} = 0x{v:0{8 if v > 0xFFFF else 2}x},\t/* {doc} */" for m, v, doc in members]
    return lines + ["};"]


def header() -> str:
    spec = fmt.SPEC
    out = [
        "/* Generated from magnetlib/format.toml by `python -m magnetlib.codegen`: do not edit. */",
        "/* SPDX-License-Identifier: GPL-2.0-or-later */",
        "#ifndef MAGNET_FORMAT_H",
        "#define MAGNET_FORMAT_H",
        "",
        "#ifndef __VMLINUX_H__",
        "#include <linux/types.h>",
        "#endif",
        "",
        "#if defined(__cplusplus)",
        "#define MAGNET_ASSERT(x) static_assert(x, #x)",
        "#else",
        "#define MAGNET_ASSERT(x) _Static_assert(x, #x)",
        "#endif",
        "",
        f"#define MAGNET_FORMAT_VERSION {fmt.VERSION}",
        f"#define MAGNET_CORE_SIZE {fmt.CORE_SIZE}",
        f"#define MAGNET_EXT_SIZE {fmt.EXT_SIZE}",
        f"#define MAGNET_EXT_RECORD_SIZE {fmt.EXT_RECORD_SIZE}",
        f"#define MAGNET_SYSINFO_SWAPPED 0x{fmt.SYSINFO_SWAPPED:08x}",
        f"#define MAGNET_META_CHUNK_SHIFT {fmt.META_CHUNK_SHIFT}",
        "",
    ]
    out += _enum("magnet_event", "MAGNET_", [(e["name"], e["code"], e["doc"]) for e in spec["event"]])
    out.append("")
    bits = [(e["name"], 1 << e["bit"], "EVENT_MASK bit") for e in spec["event"] if e["bit"]]
    out += _enum("magnet_event_bit", "MAGNET_BIT_", bits)
    out.append("")
    out += _enum("magnet_meta_key", "MAGNET_META_", [(m["name"], m["key"], m["doc"]) for m in spec["meta"]])
    out.append("")
    out += _enum("magnet_clock", "MAGNET_CLOCK_", [(c["name"], c["value"], c["doc"]) for c in spec["clock"]])
    out.append("")
    out += _enum("magnet_ext_valid", "MAGNET_EXT_", [(v["name"], v["bit"], v["doc"]) for v in spec["ext_valid"]])
    out.append("")
    out += _struct("magnet_core", fmt.CORE_FIELDS, 0)
    out.append(f"MAGNET_ASSERT(sizeof(struct magnet_core) == {fmt.CORE_SIZE});")
    out.append("")
    out += _struct("magnet_ext", fmt.EXT_FIELDS, fmt.CORE_SIZE)
    out.append(f"MAGNET_ASSERT(sizeof(struct magnet_ext) == {fmt.EXT_SIZE});")
    out += [
        "",
        "/* A record with the extended block. */",
        "struct magnet_record {",
        "\tstruct magnet_core core;",
        "\tstruct magnet_ext ext;",
        "};",
        f"MAGNET_ASSERT(sizeof(struct magnet_record) == {fmt.EXT_RECORD_SIZE});",
        "",
        "#endif /* MAGNET_FORMAT_H */",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = header()
    if argv:
        Path(argv[0]).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
