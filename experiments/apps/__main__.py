"""python -m magnet.experiments.apps list              # the suite, installed versions or what is missing
python -m magnet.experiments.apps install [NAME...]    # install their Debian packages (make setup-apps)
"""
from __future__ import annotations

import sys

from . import RECIPES, install


def list_suite() -> int:
    for recipe in RECIPES.values():
        why = recipe.missing()
        state = why.split(": ", 1)[1] if why else ", ".join(f"{k} {v}" for k, v in recipe.versions().items())
        print(f"{recipe.name:16} {recipe.kind:17} {recipe.summary}\n{'':34} {state}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["list"]:
        return list_suite()
    if argv[:1] == ["install"]:
        return install.main(argv[1:])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
