"""What the capture commands report about a capture, gathered a chunk of packets at a time:
counts, bytes on the wire, time span, flags, malformed and oversize packets."""
from __future__ import annotations

import numpy as np

from .columns import MALFORMED, Flag
from .offload import ETHERNET_MTU, LOOPBACK_MTU, Oversize, default_mtu
from .pcapfile import PcapFile

# The MTU a capture is judged by is --mtu, or the default of its links (known for pcapng
# only at its end): oversize packets are tallied per source against each candidate.
MTUS = (ETHERNET_MTU, LOOPBACK_MTU)


class Summary:
    """Per-packet facts of a capture, summed chunk by chunk."""

    def __init__(self, mtu: int | None = None):
        self.mtu = mtu
        self.packets = self.wire_bytes = self.usable_ip = self.ipv4 = self.ipv6 = 0
        self.first_ns = self.last_ns = None
        self.flags = dict.fromkeys(Flag, 0)                # packets per flag
        self.malformed = 0
        self.malformed_flags = dict.fromkeys(Flag, 0)      # malformed packets per flag
        self._big = {mtu: Tally() for mtu in ((mtu,) if mtu else MTUS)}

    def add(self, p: np.ndarray) -> None:
        if not len(p):
            return
        self.packets += len(p)
        self.wire_bytes += int(p["origlen"].sum())
        t = p["time_ns"]
        self.first_ns = int(t.min()) if self.first_ns is None else min(self.first_ns, int(t.min()))
        self.last_ns = int(t.max()) if self.last_ns is None else max(self.last_ns, int(t.max()))
        flags = p["flags"]
        bad = (flags & MALFORMED) != 0
        version = p["ip_version"]
        ip = ~bad & (version != 0)
        self.usable_ip += int(np.count_nonzero(ip))
        self.ipv4 += int(np.count_nonzero(version == 4))
        self.ipv6 += int(np.count_nonzero(version == 6))
        per_value = np.bincount(flags)                    # packets per combination of flags
        values = np.flatnonzero(per_value)
        values_bad = values[(values & MALFORMED) != 0]
        self.malformed += int(per_value[values_bad].sum())
        for f in Flag:
            self.flags[f] += int(per_value[values[(values & f) != 0]].sum())
            self.malformed_flags[f] += int(per_value[values_bad[(values_bad & MALFORMED & f) != 0]].sum())
        for mtu, tally in self._big.items():
            big = ip & (p["ip_len"] > mtu)
            if big.any():
                rows = p.compress(big)               # whole records: far cheaper than masking a field
                tally.add(rows["saddr"], rows["ip_len"])

    @property
    def duration_ns(self) -> int:
        return self.last_ns - self.first_ns if self.packets else 0

    def flag_counts(self) -> dict[str, int]:
        """Packets per flag name, as columns.flag_counts gives them."""
        return {f.name: n for f, n in self.flags.items() if n}

    def malformed_counts(self) -> dict[str, int]:
        return {f.name: n for f, n in self.malformed_flags.items() if n}

    def oversize(self, cap: PcapFile) -> Oversize:
        """IP packets longer than the MTU (given, or the capture's links' default)."""
        from ..trace import format_addresses
        report = Oversize(self.mtu or default_mtu(cap))
        tally = self._big[report.mtu]
        if tally.packets:
            report.packets, report.largest = sum(tally.packets.values()), max(tally.largest.values())
            addrs = np.frombuffer(b"".join(tally.packets), np.uint8).reshape(-1, 16)
            names = format_addresses(addrs).astype(str)
            order = np.argsort(names, kind="stable")
            names, counts = names[order], np.array(list(tally.packets.values()))[order]
            report.sources = [(str(names[i]), int(counts[i])) for i in np.argsort(-counts)]
        return report


class Tally:
    """Packets and the largest length per source address (16 bytes), over chunks."""

    def __init__(self):
        self.packets: dict[bytes, int] = {}
        self.largest: dict[bytes, int] = {}

    def add(self, addr: np.ndarray, length: np.ndarray) -> None:
        words = np.ascontiguousarray(addr).view(np.uint64).reshape(-1, 2)
        key = words[:, 0] * np.uint64(0x9E3779B97F4A7C15) ^ words[:, 1]
        uniq, first, which = np.unique(key, return_index=True, return_inverse=True)
        if (addr != addr[first][which]).any():             # two addresses, one key: exactly
            _, first, which = np.unique(addr, axis=0, return_index=True, return_inverse=True)
        which = which.reshape(-1)
        counts = np.bincount(which)
        largest = np.zeros(len(first), np.int64)
        np.maximum.at(largest, which, length.astype(np.int64))     # one dtype: numpy's fast path
        for row, n, big in zip(addr[first], counts.tolist(), largest.tolist()):
            raw = row.tobytes()
            self.packets[raw] = self.packets.get(raw, 0) + n
            self.largest[raw] = max(self.largest.get(raw, 0), big)
