"""`magnet experiment NAME [OPTIONS]`: run one of the papers' studies (experiments/NAME.py)."""
from __future__ import annotations

import argparse
import importlib

from magnetlib import signals
from magnetlib.errors import UsageError


def register(sub) -> None:
    from .common import STUDIES
    p = sub.add_parser("experiment", help="reproduce one of the papers' studies",
                       description="Run a study of the MAGNeT papers on this machine; its results "
                                   "land in --out DIR, by default ./magnet-results/NAME/ (see experiments/README.md). "
                                   "Options after NAME go to the study (NAME --help lists them).")
    p.add_argument("study", choices=STUDIES, metavar="NAME", help=", ".join(STUDIES))
    p.add_argument("options", nargs=argparse.REMAINDER, help="the study's own options")
    p.set_defaults(func=cmd_experiment, honours_signals=True)


def cmd_experiment(args) -> int:
    """The study's main(); one that does not check for signals (HONOURS_SIGNALS) runs
    with the handlers magnet started with (magnetlib.signals)."""
    try:
        module = importlib.import_module(f"magnet.experiments.{args.study}")
    except ModuleNotFoundError as e:
        raise UsageError(f"experiments/{args.study}.py", f"not available ({e})") from None
    if getattr(module, "HONOURS_SIGNALS", False):
        return module.main(args.options)
    with signals.suspended():
        return module.main(args.options)
