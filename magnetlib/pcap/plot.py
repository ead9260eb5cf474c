"""The paper's Fig. 8 for a compared stream: one second of application calls above wire packets."""
from __future__ import annotations

import numpy as np

from .compare import StreamComparison


def fig8(s: StreamComparison, path: str, start_s: float | None = None, span_s: float = 1.0,
              direction: str = "send") -> str:
    """One second of application calls and wire packets, as the paper's Fig. 8."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    app, wire = s.app[direction], s.wire[direction]
    t0 = min(app.ns.min() if len(app.ns) else np.inf, wire.ns.min() if len(wire.ns) else np.inf)
    lo = t0 + (start_s or 0.0) * 1e9
    hi = lo + span_s * 1e9
    fig, axes = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
    label = "writes" if direction == "send" else "reads"
    for ax, series, title in ((axes[0], app, f"application {label} (SOCK_{direction.upper()})"),
                              (axes[1], wire, "wire packets (pcap), TCP payload")):
        keep = (series.ns >= lo) & (series.ns < hi)
        x = (series.ns[keep] - lo) / 1e9
        ax.vlines(x, 0, series.size[keep], linewidth=0.8)
        ax.set_ylabel("bytes")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
    axes[1].set_xlabel(f"seconds (from {(lo - t0) / 1e9:g} s into the stream)")
    axes[1].set_xlim(0, span_s)
    fig.suptitle(f"stream {s.sockid:#x}: application vs wire")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
