"""A progress bar for waits that cannot report progress themselves: a build, a
replay running in real time.  It counts seconds on stderr from a thread, on a
terminal only: in a log, redrawn bars are noise (the callers' own lines stand).

    with progress.timed("stack 1/4", expected_s=20):   # fills over 20 s
        wait_for_the_stack()
    with progress.timed("building magnet-read"):       # counts the seconds
        make()
"""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager


@contextmanager
def timed(desc: str, expected_s: float | None = None, show: bool = True):
    if not show or not sys.stderr.isatty():
        yield
        return
    from tqdm.auto import tqdm
    if expected_s is None:
        bar = tqdm(desc=desc, file=sys.stderr, leave=False, bar_format="{desc}: {elapsed}")
    else:
        bar = tqdm(total=max(round(expected_s, 1), 0.1), desc=desc, unit="s", file=sys.stderr,
                   leave=False, dynamic_ncols=True, bar_format="{desc}: {bar} {n:.0f}/{total:.0f} s")
    done = threading.Event()

    def tick():
        started = time.monotonic()
        while not done.wait(0.5):
            if expected_s is not None:
                bar.n = min(time.monotonic() - started, bar.total)
            bar.refresh()
    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        bar.close()
