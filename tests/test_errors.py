"""One error hierarchy: every error magnet defines is a magnetlib.MagnetError, so the
`magnet` command's handler (magnetlib.cli.run) turns each into one line and exit 2;
anything else is reported as an internal error."""
import argparse
import importlib

import pytest

import magnetlib
from magnetlib import cli

from .test_layers import modules

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


# Exceptions that steer control inside one module and never reach a command's handler.
INTERNAL = {
    "magnet.replay.endpoint.PeerClosed": "ends an endpoint worker's loop; its main() reports it",
    "magnetlib.pcap.decode.Skip": "a packet that decodes no further: flagged, never raised out",
}


def defined_errors() -> dict[str, type]:
    """Every exception class (not a KeyboardInterrupt) defined in magnetlib and the
    magnet.* layers, by its dotted name."""
    found = {}
    for _, name, path in modules():
        if path.name == "__main__.py":
            continue
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, Exception)
                    and value.__module__ == module.__name__):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


DEFINED = defined_errors()
ERRORS = [DEFINED[name] for name in sorted(DEFINED) if name not in INTERNAL]


def test_the_tree_defines_errors_to_check():
    names = {e.__name__ for e in ERRORS}
    assert {"MagnetError", "TraceError", "BuildError", "CaptureError", "ReplayError", "LibraryError",
            "ShipError", "NetnsError", "Ns3Error", "LinkemError"} <= names
    assert set(INTERNAL) <= set(DEFINED), "an exception left out here no longer exists"


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: f"{e.__module__}.{e.__name__}")
def test_every_error_is_a_magnet_error(error):
    assert issubclass(error, magnetlib.MagnetError), (
        f"{error.__module__}.{error.__name__} derives from {[b.__name__ for b in error.__mro__[1:]]}")


def instance(error: type) -> BaseException:
    """An instance of `error` built the way the tree builds it: (WHAT, problem), else a message."""
    try:
        return error("what", "the problem")
    except TypeError:
        return error("what", "the problem", None)            # AppRunFailed also holds its run


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: f"{e.__module__}.{e.__name__}")
def test_the_command_reports_each_in_one_line(error, capsys):
    def command(args):
        raise instance(error)
    status = cli.run(argparse.Namespace(func=command, command="test"))
    err = capsys.readouterr().err
    assert status == 2
    assert err == "magnet: what: the problem\n"


def test_an_error_of_another_kind_is_an_internal_error(capsys, monkeypatch):
    """The handler can tell: what is not a MagnetError is a bug of ours, said as such."""
    monkeypatch.delenv("MAGNET_DEBUG", raising=False)

    def command(args):
        raise RuntimeError("what: the problem")
    assert cli.run(argparse.Namespace(func=command, command="test")) == 1
    assert "internal error: RuntimeError" in capsys.readouterr().err


def test_one_part_and_two_part_messages():
    assert str(magnetlib.MagnetError("a sentence")) == "a sentence"
    e = magnetlib.TraceError("x.magnet", "truncated")
    assert (str(e), e.path, e.problem) == ("x.magnet: truncated", "x.magnet", "truncated")
