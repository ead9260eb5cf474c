"""Build and run the ns-3 side of magnet (ns3-app/) against ns-3 from PyPI.

    from magnet.replay import ns3
    programs = ns3.build()            # compiled once, cached by a hash of sources, flags, ns-3
    run = ns3.run_chain("demand.magnet", "out", ns3.ChainParams(stacks=4))
    run.summary["stacks"][0]["bytes_received"]

ns-3 comes from `pip install --no-deps ns3` (headers and shared libraries; the
Python bindings are not needed).  MAGNET_NS3_ROOT points at another ns-3
install tree (include/, lib64/ or lib/); MAGNET_NS3_BUILD moves the build cache
(default ~/.cache/magnet/ns3).

    python -m magnet.replay.ns3 build        # build now (make test does), print where
    python -m magnet.replay.ns3 test         # build, then run the ns-3 TestSuite
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from magnet import capture, ns3app
from magnetlib import buildcache
from magnetlib.errors import TraceError

APP_DIR = Path(ns3app.__file__).resolve().parent            # ns3-app/ in a checkout
FORMAT_HEADER_DIR = Path(capture.__file__).resolve().parent  # capture/magnet_format.h
INSTALL_HINT = "pip install --no-deps ns3"
CXXFLAGS = ["-std=c++20", "-O2", "-g0", "-Wall", "-Wextra", "-Wno-unused-parameter"]
NS3_MODULES = ["point-to-point", "applications", "internet", "network", "core",
               "traffic-control", "stats"]
# Programs and their main source; every program links the model and helper objects.
PROGRAMS = {
    "magnet-chain": "examples/magnet-chain.cc",
    "magnet-replay-example": "examples/magnet-replay-example.cc",
    "magnet-replay-test": "test/magnet-replay-test-suite.cc",
}
LIBRARY_DIRS = ("model", "helper")


class Ns3Error(TraceError):
    """ns-3 missing, a failed build or a failed run: one line, "WHAT: problem"."""


# ------------------------------------------------------------------ ns-3 ---
@dataclass(frozen=True)
class Ns3Install:
    root: Path
    version: str          # e.g. "3.44"
    libdir: Path


def find_ns3() -> Ns3Install:
    """The ns-3 to build against: MAGNET_NS3_ROOT, else the `ns3` pip package (not imported)."""
    root = os.environ.get("MAGNET_NS3_ROOT")
    if root is None:
        spec = importlib.util.find_spec("ns3")
        if spec is None or not spec.submodule_search_locations:
            raise Ns3Error("ns-3", f"not installed in this Python ({sys.executable}): "
                                   f"run `{INSTALL_HINT}`")
        root = list(spec.submodule_search_locations)[0]
    root = Path(root)
    for libdir in (root / "lib64", root / "lib"):
        cores = sorted(libdir.glob("libns3*-core*.so"))
        if cores and (root / "include" / "ns3" / "core-module.h").exists():
            match = re.match(r"libns(3[\d.]*?)-core", cores[0].name)
            return Ns3Install(root, match.group(1) if match else "unknown", libdir)
    raise Ns3Error(str(root), f"not an ns-3 install (no include/ns3 and lib64/libns3*-core.so); "
                              f"run `{INSTALL_HINT}`")


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++")
    if not cxx:
        raise Ns3Error("g++", "not found: install it (Debian: apt-get install g++)")
    return cxx


# ----------------------------------------------------------------- build ---
@dataclass(frozen=True)
class Programs:
    directory: Path
    ns3: Ns3Install
    built_seconds: float      # 0 when taken from the cache

    def path(self, name: str) -> Path:
        return self.directory / "bin" / name

    @property
    def chain(self) -> Path:
        return self.path("magnet-chain")


def _sources() -> list[tuple[str, Path]]:
    """Every file the programs are built from, by a name independent of where the tree is."""
    return ([(f"ns3-app/{name}", path) for name, path in buildcache.tree(APP_DIR, (".cc", ".h"))]
            + [("capture/magnet_format.h", FORMAT_HEADER_DIR / "magnet_format.h")])


def _flags(ns3: Ns3Install) -> list[str]:
    includes = [f"-I{APP_DIR / d}" for d in LIBRARY_DIRS] + [f"-I{FORMAT_HEADER_DIR}",
                                                            f"-I{ns3.root / 'include'}"]
    return CXXFLAGS + [f'-DMAGNET_NS3_VERSION="{ns3.version}"'] + includes


def _link_flags(ns3: Ns3Install) -> list[str]:
    prefix = next(iter(ns3.libdir.glob("libns3*-core*.so"))).name.split("-core")[0][3:]
    return [f"-L{ns3.libdir}", f"-Wl,-rpath,{ns3.libdir}"] + [f"-l{prefix}-{m}" for m in NS3_MODULES]


def build_key(ns3: Ns3Install, cxx: str) -> str:
    """A hash of everything the programs depend on: sources, flags, compiler, ns-3."""
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    return buildcache.key(_sources(), [*_flags(ns3), *_link_flags(ns3), cxx, version, str(ns3.root),
                                       ns3.version])


def build(force: bool = False, quiet: bool = False) -> Programs:
    """The compiled programs, building them if their sources, flags or ns-3 changed
    (into $MAGNET_NS3_BUILD, default the per-user cache's ns3/)."""
    ns3, cxx = find_ns3(), _compiler()
    digest = build_key(ns3, cxx)
    base = Path(os.environ["MAGNET_NS3_BUILD"]) if os.environ.get("MAGNET_NS3_BUILD") else None
    if force:
        shutil.rmtree((base or buildcache.root() / "ns3") / digest, ignore_errors=True)
    target, seconds = buildcache.build("ns3", digest, lambda work: _compile_all(ns3, cxx, work),
                                       base=base, quiet=quiet, label=f"ns3-app against ns-3 {ns3.version}")
    return Programs(target, ns3, seconds)


def _compile_all(ns3: Ns3Install, cxx: str, work: Path) -> None:
    (work / "obj").mkdir()
    (work / "bin").mkdir()
    library = [p for d in LIBRARY_DIRS for p in sorted((APP_DIR / d).glob("*.cc"))]
    mains = {name: APP_DIR / src for name, src in PROGRAMS.items()}
    units = library + list(mains.values())
    objects = {src: work / "obj" / (src.stem + ".o") for src in units}
    flags = _flags(ns3)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        jobs = [pool.submit(_run_compiler, [cxx, *flags, "-c", str(src), "-o", str(obj)], src)
                for src, obj in objects.items()]
        for job in jobs:
            job.result()
    for name, src in mains.items():
        inputs = [str(objects[s]) for s in library] + [str(objects[src])]
        _run_compiler([cxx, *inputs, "-o", str(work / "bin" / name), *_link_flags(ns3)], src)
    (work / "ns-3").write_text(f"ns-3 {ns3.version} at {ns3.root}\n")


def _run_compiler(command: list[str], source: Path) -> None:
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        errors = [line for line in proc.stderr.splitlines() if "error" in line]
        first = (errors or proc.stderr.splitlines() or ["(no output)"])[0]
        raise Ns3Error(f"ns3-app/{source.relative_to(APP_DIR)}", f"build failed: {first.strip()}")


# ------------------------------------------------------------ parameters ---
_NUMBER = r"(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)"
_RATE_UNITS = {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}
_TIME_UNITS = {"": 1e9, "s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1}


def ns3_rate(text: str) -> str:
    """A link rate ("20e6", "20M", "20Mbps", "1Gb/s") as ns-3 takes it ("20000000bps")."""
    m = re.fullmatch(_NUMBER + r"\s*([kKmMgG]?)(?:bps|b/s|bit/s)?", text.strip())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"rate {text!r}: use bits per second, e.g. 20e6, 20Mbps or 1Gbps")
    return _with_unit(round(float(m.group(1)) * _RATE_UNITS[m.group(2)]),
                      [(10**9, "Gbps"), (10**6, "Mbps"), (10**3, "kbps"), (1, "bps")])


def ns3_time(text: str) -> str:
    """A time ("0.03" seconds, "30ms", "500us") as ns-3 takes it ("30000000ns")."""
    m = re.fullmatch(_NUMBER + r"\s*(s|ms|us|ns)?", text.strip())
    if not m:
        raise ValueError(f"time {text!r}: use seconds or a unit, e.g. 0.03 or 30ms")
    return _with_unit(round(float(m.group(1)) * _TIME_UNITS[m.group(2) or ""]),
                      [(10**9, "s"), (10**6, "ms"), (10**3, "us"), (1, "ns")])


def _with_unit(value: int, units: list[tuple[int, str]]) -> str:
    """The largest unit that shows `value` exactly: 20000000 -> 20Mbps."""
    scale, name = next((s, n) for s, n in units if value % s == 0)
    return f"{value // scale}{name}"


def ns3_queue(text: str) -> str:
    """A queue size in packets ("100", "100p") or bytes ("150000B")."""
    m = re.fullmatch(r"(\d+)\s*([pB]?)", text.strip())
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"queue {text!r}: use packets (100 or 100p) or bytes (150000B)")
    return f"{m.group(1)}{m.group(2) or 'p'}"


# ------------------------------------------------------------------- run ---
@dataclass
class ChainParams:
    """One chained-stack scenario; values as ns-3 takes them ("20Mbps", "30ms", "100p")."""
    stacks: int = 4
    rate: str = "20Mbps"
    delay: str = "30ms"
    queue: str = "100p"
    mss: int = 1448
    tcp: str = "TcpNewReno"
    sndbuf: int = 131072
    rcvbuf: int = 131072
    loss: float = 0.0
    nagle: bool = True
    live: bool = False
    new_data_only: bool = False
    start_offset: str = "0s"
    read_size: int = 65536
    seed: int = 1

    ARGS = {"new_data_only": "newDataOnly", "start_offset": "startOffset",
            "read_size": "readSize"}

    def args(self) -> list[str]:
        out = []
        for name, value in asdict(self).items():
            if isinstance(value, bool):
                value = int(value)
            out.append(f"--{self.ARGS.get(name, name)}={value}")
        return out

    def replace(self, **changes) -> "ChainParams":
        values = asdict(self)
        values.update(changes)
        return ChainParams(**values)


@dataclass
class ChainRun:
    out_dir: Path
    summary: dict
    output: str
    traces: list[Path] = field(default_factory=list)


def run_chain(demand_path: str | os.PathLike, out_dir: str | os.PathLike,
              params: ChainParams | None = None, *, stream: int = 0, bulk_reference: bool = False,
              no_trace: bool = False, programs: Programs | None = None) -> ChainRun:
    """Run the chained-stack scenario; its traces and summary.json go to `out_dir`."""
    params = params or ChainParams()
    programs = programs or build()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    command = [str(programs.chain), f"--demand={os.fspath(demand_path)}", f"--out={out}",
               f"--stream={stream}", *params.args()]
    if bulk_reference:
        command.append("--bulkReference=1")
    if no_trace:
        command.append("--noTrace=1")
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        problem = lines[-1].removeprefix("magnet-chain: ") if lines else f"exit {proc.returncode}"
        if ": " not in problem:
            problem = f"ns-3: {problem}"
        what, _, rest = problem.partition(": ")
        raise Ns3Error(what, rest)
    summary = json.loads((out / "summary.json").read_text())
    traces = [Path(s["trace"]) for s in summary["stacks"] if s["trace"]]
    return ChainRun(out, summary, proc.stdout, traces)


def run_tests(programs: Programs | None = None, *args: str) -> subprocess.CompletedProcess:
    """Run the ns-3 TestSuite (magnet-replay-test); returns the completed process."""
    programs = programs or build()
    return subprocess.run([str(programs.path("magnet-replay-test")), *args],
                          capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m magnet.replay.ns3", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["build", "test"])
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = ap.parse_args(argv)
    try:
        programs = build(force=args.force)
        print(programs.directory)
        if args.action == "test":
            proc = run_tests(programs)
            sys.stdout.write(proc.stdout + proc.stderr)
            return proc.returncode
    except TraceError as e:
        print(f"replay.ns3: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
