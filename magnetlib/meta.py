"""SYSINFO and the metadata records after it: encoding for writers, decoding for readers."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from . import format as fmt
from .errors import TraceError
from .format import Clock, Event, MetaKey

# The most META records a header may hold before its END: a bound for readers.
MAX_META_RECORDS = 4096


@dataclass
class TraceMeta:
    """What a reader needs to interpret a trace, beyond the records themselves.

    The fields after anchor_ticks are the optional metadata keys of format.toml
    (MetaKey names in lower case); None means the trace does not say.
    """
    version: int = fmt.VERSION
    record_size: int = fmt.CORE_SIZE
    clock_khz: int = 1_000_000
    anchor_ticks: int | None = None     # SYSINFO timestamp; writers default it to the first record's
    wall_anchor_ns: int | None = None
    clock_source: int | None = None
    host_id: int | None = None
    hostname: str | None = None
    producer: str | None = None
    kernel: str | None = None
    buffer_bytes: int | None = None
    drain_delay_us: int | None = None
    event_mask: int | None = None
    ext_mask: int | None = None
    filter: str | None = None
    segment_index: int | None = None
    capture_method: str | None = None
    unknown: dict[int, object] = field(default_factory=dict)

    @property
    def has_ext(self) -> bool:
        return self.record_size == fmt.EXT_RECORD_SIZE

    @property
    def clock_name(self) -> str:
        try:
            return Clock(self.clock_source).name
        except ValueError:
            return "unknown"

    def replace(self, **changes) -> "TraceMeta":
        return dataclasses.replace(self, **changes)


META_FIELD = {key: key.name.lower() for key in MetaKey if key != MetaKey.END}
_FIELDS = {f.name for f in dataclasses.fields(TraceMeta)}
assert set(META_FIELD.values()) <= _FIELDS, "TraceMeta lacks a field for a MetaKey"


def sysinfo_sockid(version: int, record_size: int) -> int:
    return (version << 32) | record_size


def encode_header(meta: TraceMeta, dtype: np.dtype) -> np.ndarray:
    """SYSINFO, one META record per value (text in 8-byte chunks), and END."""
    entries: list[tuple[int, bytes | int]] = []        # (size field, value)
    for key, name in META_FIELD.items():
        value = getattr(meta, name)
        if value is None:
            continue
        if fmt.META_KIND[key] == "text":
            raw = str(value).encode()
            chunks = [raw[i:i + 8].ljust(8, b"\0") for i in range(0, max(len(raw), 1), 8)]
            entries += [(int(key) | (i << fmt.META_CHUNK_SHIFT), c) for i, c in enumerate(chunks)]
        else:
            entries.append((int(key), int(value)))
    entries.append((int(MetaKey.END), len(entries)))

    head = np.zeros(1 + len(entries), dtype=dtype)
    head["timestamp"] = meta.anchor_ticks
    head["event"] = Event.META
    head["event"][0] = Event.SYSINFO
    head["sockid"][0] = sysinfo_sockid(meta.version, meta.record_size)
    head["size"][0] = meta.clock_khz
    raw = head.view(np.uint8).reshape(len(head), dtype.itemsize)
    for i, (size, value) in enumerate(entries, start=1):
        head["size"][i] = size
        if isinstance(value, bytes):
            raw[i, :8] = np.frombuffer(value, np.uint8)   # raw bytes: byte-order independent
        else:
            head["sockid"][i] = value
    return head


def decode_header(head: np.ndarray, path: str) -> tuple[TraceMeta, int]:
    """Parse SYSINFO and the META block at the start of a trace.

    Returns the metadata and the number of header records.
    """
    first = head[0]
    version, record_size = int(first["sockid"]) >> 32, int(first["sockid"]) & 0xFFFFFFFF
    meta = TraceMeta(version=version, record_size=record_size,
                     clock_khz=int(first["size"]), anchor_ticks=int(first["timestamp"]))
    check_sysinfo(meta, path, where="SYSINFO")

    events = head["event"][1:MAX_META_RECORDS + 2]
    not_meta = np.flatnonzero(events != Event.META)
    count = int(not_meta[0]) if len(not_meta) else len(events)
    block = head[1:1 + count]
    if count == 0 or (int(block[-1]["size"]) & 0xFFFF) != MetaKey.END:
        raise TraceError(path, "impossible metadata: the META block after SYSINFO has no END record")
    if int(block[-1]["sockid"]) != count - 1:
        raise TraceError(path, f"impossible metadata: END counts {int(block[-1]['sockid'])} "
                               f"META records but {count - 1} precede it")
    _decode_values(meta, block[:-1], path)
    return meta, 1 + count


def check_sysinfo(meta: TraceMeta, path: str, where: str) -> None:
    if meta.version == 0 or meta.version > fmt.VERSION:
        raise TraceError(path, f"{where}: format version {meta.version} is not one this reader "
                               f"knows (it reads version {fmt.VERSION})")
    if meta.record_size not in fmt.RECORD_SIZES:
        raise TraceError(path, f"{where}: impossible record size {meta.record_size} "
                               f"(expected one of {fmt.RECORD_SIZES})")
    if meta.clock_khz <= 0:
        raise TraceError(path, f"{where}: impossible clock rate {meta.clock_khz} kHz")
    if meta.anchor_ticks == 0:
        raise TraceError(path, f"{where}: timestamp is 0")


def _decode_values(meta: TraceMeta, block: np.ndarray, path: str) -> None:
    sizes = block["size"].astype(np.int64)
    keys, chunks = sizes & 0xFFFF, sizes >> fmt.META_CHUNK_SHIFT
    values = block["sockid"].astype(np.uint64)
    raw = np.ascontiguousarray(block).view(np.uint8).reshape(len(block), block.dtype.itemsize)[:, :8]
    texts: dict[int, list[tuple[int, bytes]]] = {}
    for key, chunk, value, raw8 in zip(keys.tolist(), chunks.tolist(), values.tolist(), raw):
        try:
            mkey = MetaKey(key)
        except ValueError:
            meta.unknown[key] = value      # a newer writer's key: kept, not interpreted
            continue
        if fmt.META_KIND[mkey] == "text":
            texts.setdefault(key, []).append((chunk, raw8.tobytes()))
        else:
            setattr(meta, META_FIELD[mkey], value)
    for key, parts in texts.items():
        text = b"".join(part for _, part in sorted(parts)).rstrip(b"\0")
        setattr(meta, META_FIELD[MetaKey(key)], text.decode("utf-8", "replace"))
    if meta.clock_source is not None and meta.clock_source not in set(Clock):
        raise TraceError(path, f"impossible metadata: unknown clock source {meta.clock_source}")
