"""Parameter sweeps: every combination of `--sweep KEY=V1,V2,...` values, run in parallel processes."""
from __future__ import annotations

import itertools
import re
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Callable

from magnetlib import signals


def parse(specs: list[str], converters: dict[str, Callable[[str], object]]) -> list[dict]:
    """The combinations (dicts key -> value) of the swept values, first key slowest.

    Raises ValueError naming the bad spec.
    """
    axes: dict[str, list] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not values.strip():
            raise ValueError(f"--sweep {spec!r}: use KEY=V1,V2,...")
        if key not in converters:
            raise ValueError(f"--sweep {spec!r}: unknown key {key!r} (known: {', '.join(converters)})")
        if key in axes:
            raise ValueError(f"--sweep {spec!r}: {key} is swept twice")
        try:
            axes[key] = [converters[key](v.strip()) for v in values.split(",") if v.strip()]
        except (ValueError, KeyError) as e:
            raise ValueError(f"--sweep {spec!r}: {e}") from None
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def label(combo: dict) -> str:
    """'rate=10Mbps,tcp=TcpCubic': names a run in tables."""
    return ",".join(f"{k}={v}" for k, v in combo.items())


def slug(combo: dict) -> str:
    """A directory name for a run."""
    return re.sub(r"[^\w.=,-]+", "_", label(combo)) or "run"


def run_parallel(fn: Callable, tasks: list, jobs: int, desc: str) -> list:
    """fn(task) for every task in up to `jobs` processes, with a progress bar; results in task order.

    fn must be a module-level function; it should return its errors rather than raise them.
    A signal (magnetlib.signals) ends the workers (and what they run dies with them).
    """
    from tqdm import tqdm
    results: list = [None] * len(tasks)
    pool = ProcessPoolExecutor(max_workers=max(1, jobs))
    try:
        futures = {pool.submit(fn, task): i for i, task in enumerate(tasks)}
        with tqdm(total=len(tasks), desc=desc, unit="run", file=sys.stderr, disable=None) as bar:
            waiting = set(futures)
            while waiting:
                done, waiting = wait(waiting, timeout=signals.SLICE_S, return_when=FIRST_COMPLETED)
                signals.check()
                for future in done:
                    results[futures[future]] = future.result()
                    bar.update()
    except BaseException:
        _kill_workers(pool)
        raise
    finally:
        pool.shutdown(cancel_futures=True)
    return results


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """ProcessPoolExecutor.kill_workers() of Python 3.14, by hand before it."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.kill()
