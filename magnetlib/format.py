"""The trace format, built from format.toml: numpy dtypes, event codes, metadata keys.

Everything that knows the byte layout of a record imports it from here; the C
header (capture/magnet_format.h) is generated from the same file.
"""
from __future__ import annotations

import enum
import tomllib
from dataclasses import dataclass
from importlib import resources

import numpy as np

SPEC = tomllib.loads(resources.files(__package__).joinpath("format.toml").read_text())

VERSION: int = SPEC["version"]
CORE_SIZE: int = SPEC["core_size"]
EXT_SIZE: int = SPEC["ext_size"]
EXT_RECORD_SIZE = CORE_SIZE + EXT_SIZE
RECORD_SIZES = (CORE_SIZE, EXT_RECORD_SIZE)

# Scalar types of the description, as numpy type codes (byte order added later).
SCALARS = {"u8": "u1", "u16": "u2", "u32": "u4", "u64": "u8", "i32": "i4", "i64": "i8"}


@dataclass(frozen=True)
class Field:
    name: str
    scalar: str      # key of SCALARS
    count: int       # 1, or the length of an array field
    offset: int
    doc: str

    @property
    def width(self) -> int:
        return int(SCALARS[self.scalar][1:])

    @property
    def size(self) -> int:
        return self.width * self.count


def _layout(entries: list[dict], base: int) -> list[Field]:
    """Place fields one after another, refusing any that would need padding."""
    fields, offset = [], base
    for entry in entries:
        scalar, _, count = entry["type"].partition("[")
        field = Field(entry["name"], scalar, int(count.rstrip("]") or 1), offset, entry["doc"])
        if offset % field.width:
            raise ValueError(f"format.toml: {field.name} at offset {offset} would need padding")
        fields.append(field)
        offset += field.size
    return fields


CORE_FIELDS = _layout(SPEC["core"], 0)
EXT_FIELDS = _layout(SPEC["ext"], CORE_SIZE)
assert CORE_FIELDS[-1].offset + CORE_FIELDS[-1].size == CORE_SIZE, "core_size disagrees"
assert EXT_FIELDS[-1].offset + EXT_FIELDS[-1].size == EXT_RECORD_SIZE, "ext_size disagrees"


def record_dtype(record_size: int = CORE_SIZE, byteorder: str = "=") -> np.dtype:
    """The structured dtype of one record, in the given byte order ('<', '>' or '=')."""
    if record_size not in RECORD_SIZES:
        raise ValueError(f"record size {record_size} is not one of {RECORD_SIZES}")
    fields = CORE_FIELDS + (EXT_FIELDS if record_size == EXT_RECORD_SIZE else [])
    return np.dtype({
        "names": [f.name for f in fields],
        "formats": [(byteorder + SCALARS[f.scalar], (f.count,)) if f.count > 1
                    else byteorder + SCALARS[f.scalar] for f in fields],
        "offsets": [f.offset for f in fields],
        "itemsize": record_size,
    })


def _int_enum(name: str, table: str, value_key: str) -> type[enum.IntEnum]:
    return enum.IntEnum(name, {e["name"]: e[value_key] for e in SPEC[table]})


Event = _int_enum("Event", "event", "code")
MetaKey = _int_enum("MetaKey", "meta", "key")
Clock = _int_enum("Clock", "clock", "value")
ExtValid = _int_enum("ExtValid", "ext_valid", "bit")

SYSINFO = int(Event.SYSINFO)
SYSINFO_SWAPPED = int.from_bytes(SYSINFO.to_bytes(4, "little"), "big")
META_KIND = {MetaKey[m["name"]]: m["kind"] for m in SPEC["meta"]}
META_CHUNK_SHIFT = 16
EVENT_SPEC = {Event[e["name"]]: e for e in SPEC["event"]}

# Events by stack position: layer in {"sock", "tcp", "ip", "dev"}, direction in {"send", "recv"}.
LAYERS = ("sock", "tcp", "ip", "dev")
NETWORK_EVENTS = {ev: (spec["layer"], spec["direction"])
                  for ev, spec in EVENT_SPEC.items() if "direction" in spec}
SCHED_EVENTS = frozenset(ev for ev, spec in EVENT_SPEC.items() if spec["layer"] == "sched")


def layer_events(layer: str, direction: str) -> list[Event]:
    """The event codes of one layer and direction (TCP send includes retransmissions)."""
    return [ev for ev, where in NETWORK_EVENTS.items() if where == (layer, direction)]


def event_mask(events) -> int:
    """EVENT_MASK bits for a collection of events."""
    return sum(1 << EVENT_SPEC[Event(ev)]["bit"] for ev in events if EVENT_SPEC[Event(ev)]["bit"])


# A lookup table from small event codes to a dense index: vectorised validity
# checks and per-kind counts use it instead of Python branches per record.
EVENT_TABLE_SIZE = 256
EVENT_INDEX = np.full(EVENT_TABLE_SIZE, -1, dtype=np.int16)
INDEX_EVENT = [ev for ev in Event if ev < EVENT_TABLE_SIZE]
for _i, _ev in enumerate(INDEX_EVENT):
    EVENT_INDEX[_ev] = _i
assert all(ev < EVENT_TABLE_SIZE for ev in Event if ev != Event.SYSINFO)


def event_name(code: int) -> str:
    try:
        return Event(code).name
    except ValueError:
        return f"0x{code:08x}"
