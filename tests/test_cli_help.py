"""Every command's --help renders (argparse expands % in help texts only then)."""
import argparse

import pytest

from magnet.experiments.common import STUDIES
from magnetlib.cli import build_parser, main

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


def parsers(parser: argparse.ArgumentParser, name: str = "magnet"):
    """`parser` and every subcommand's parser below it, with their full names."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from parsers(child, f"{name} {sub}")


def test_every_command_help_renders():
    found = dict(parsers(build_parser()))
    assert {"magnet replay tcp", "magnet library add", "magnet capture"} <= set(found)
    for name, parser in found.items():
        assert parser.format_help(), name


@pytest.mark.parametrize("study", STUDIES)
def test_every_study_help_renders(study, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["experiment", study, "--help"])
    assert stop.value.code == 0
    assert "--out" in capsys.readouterr().out
