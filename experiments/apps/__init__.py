"""The suite of real applications (docs/apps.md): name -> recipe.

    from magnet.experiments.apps import RECIPES
    for name, recipe in RECIPES.items():
        recipe.missing()          # None, or one line naming the Debian package
        recipe.versions()         # package -> version, recorded with every result
"""
from __future__ import annotations

from .h2load import H2loadHttp1, H2loadHttp2
from .http_python import HttpPython
from .memcached import Memcached
from .mosquitto import Mosquitto
from .nginx import NginxBulk
from .recipe import KINDS, Commands, Package, Recipe, RecipeError
from .redis import RedisBenchmark, RedisPaced
from .scp import Scp
from .vsftpd import Vsftpd

SUITE = (HttpPython(), NginxBulk(), Scp(), Vsftpd(), RedisBenchmark(), RedisPaced(), Memcached(),
         H2loadHttp1(), H2loadHttp2(), Mosquitto())
RECIPES: dict[str, Recipe] = {r.name: r for r in SUITE}

__all__ = ["KINDS", "RECIPES", "SUITE", "Commands", "Package", "Recipe", "RecipeError"]


def main(argv: list[str] | None = None) -> int:
    """`magnet experiment apps` (experiments/apps/study.py)."""
    from .study import main as study
    return study(argv)
