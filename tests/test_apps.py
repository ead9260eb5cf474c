"""The suite of real applications (experiments/apps/): every recipe's server becomes ready
in its namespace, the cheap ones do their work across an emulated path, a missing package
is named in one line, and nothing of a run is left running afterwards."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from magnet.experiments.apps import KINDS, RECIPES, Commands, Package, RecipeError, run
from magnet.experiments.apps.http_python import HttpPython
from magnet.replay import linkem
from magnet.replay.path import PathError
from magnet.replay.scenario import Path as NetPath

from magnetlib import app_demand

from .conftest import assert_clean_error, require, require_root, run_magnet

PATH = NetPath(rate_bps=20_000_000, delay_ns=5_000_000, duplex=True)
CHEAP = ["http-python", "nginx-bulk", "redis-benchmark"]


@pytest.fixture
def namespaces():
    require_root()
    why = linkem.unavailable()
    require(why is None, f"emulated path: {why}")


def ready(recipe) -> None:
    why = recipe.missing()
    require(why is None, f"{why} (make setup-apps)")


def noting_namespace(cmd: list[str], note: Path) -> list[str]:
    """`cmd` after writing its network namespace (net:[INODE]) to `note`."""
    return ["sh", "-c", f'readlink /proc/self/ns/net > "{note}" && exec "$@"', "sh", *cmd]


def processes_in(*notes: Path) -> list[int]:
    """Processes still in the network namespaces that `notes` name."""
    names = {note.read_text().strip() for note in notes}
    left = []
    for ns in Path("/proc").glob("[0-9]*/ns/net"):
        try:
            if os.readlink(ns) in names:
                left.append(int(ns.parent.parent.name))
        except OSError:
            pass
    return left


def test_the_suite_covers_every_kind():
    assert len(RECIPES) >= 6
    assert {r.kind for r in RECIPES.values()} == set(KINDS)
    for recipe in RECIPES.values():
        assert recipe.packages and all(os.path.isabs(p.program) for p in recipe.packages), recipe.name
        assert 0 < recipe.slow_path_s <= 60, recipe.name        # tens of seconds at 200 ms, 2 Mbit/s


class Absent(HttpPython):
    name = "absent"
    packages = (Package("magnet-no-such-package", "/usr/bin/magnet-no-such-program"),)


def test_a_missing_program_is_named_with_its_package(tmp_path):
    line = Absent().missing()
    assert line == ("absent: magnet-no-such-program not installed (Debian: apt-get install "
                    "magnet-no-such-package; or make setup-apps)")
    with pytest.raises(RecipeError, match="magnet-no-such-program not installed"):
        run.run(Absent(), PATH, tmp_path)
    assert not list(tmp_path.iterdir())                 # refused before writing anything


@pytest.mark.parametrize("name", list(RECIPES))
def test_every_server_becomes_ready_and_is_ended(name, namespaces, tmp_path):
    recipe = RECIPES[name]
    ready(recipe)
    commands = recipe.prepare(tmp_path)
    server, client = tmp_path / "server.ns", tmp_path / "client.ns"
    idle = Commands(noting_namespace(commands.server, server), noting_namespace(["true"], client),
                    commands.port)
    outcome = run.execute(idle, PATH, tmp_path, name)
    assert outcome.status == 0
    assert server.read_text() != client.read_text()
    assert not processes_in(server, client)


def test_a_server_that_never_listens_is_reported(namespaces, tmp_path):
    broken = Commands(["sh", "-c", "echo 'bad config line 3' >&2; exit 1"], ["true"], 9)
    with pytest.raises(PathError, match=r"exited \(status 1\) before listening; its last output: bad config line 3"):
        run.execute(broken, PATH, tmp_path, "broken")


@pytest.mark.parametrize("name", CHEAP)
def test_cheap_applications_do_their_work_across_a_path(name, namespaces, tmp_path):
    recipe = RECIPES[name]
    ready(recipe)
    result = run.run(recipe, PATH, tmp_path)
    assert result.work and result.seconds > 0
    assert set(result.versions) == {p.name for p in recipe.packages}
    assert all(v != "unknown" for v in result.versions.values()), result.versions
    assert result.rtt_ms >= 9.9        # across the path: its 10 ms RTT at least (more on a loaded machine)


def test_the_study_makes_a_library_of_demands(namespaces, tmp_path):
    """magnet experiment apps on one application and one path: captured, in the library with its
    application and path, and its whole-application demand exported."""
    from magnet.replay import wire
    require(wire.bpf_unavailable() is None, f"the capture: {wire.bpf_unavailable()}")
    ready(RECIPES["http-python"])
    out = tmp_path / "out"
    proc = run_magnet("experiment", "apps", "--apps", "http-python", "--paths", "10ms-20Mbps", "--out", out)
    assert proc.returncode == 0, proc.stderr_text
    rows = pd.read_csv(out / "apps.csv")
    assert rows[["app", "path", "status", "connections", "client_bytes"]].values.tolist() == [
        ["http-python", "10ms-20Mbps", "ok", 1, 87]]
    assert rows["server_bytes"].iloc[0] > 1_000_000 and rows["s2c_segments"].iloc[0] > 690
    assert rows["rtt_ms"].iloc[0] >= 9.9
    catalogue = pd.read_csv(out / "catalogue.csv")
    assert sorted(catalogue["host"]) == ["client", "server"]
    assert set(catalogue["application"]) == {"http-python"} and set(catalogue["path"]) == {"10ms-20Mbps"}
    index = pd.read_csv(out / "demands" / "index.csv")
    demand = app_demand.read(out / "demands" / index["file"].iloc[0])
    assert demand.sent_bytes(app_demand.SERVER) == rows["server_bytes"].iloc[0]
    assert not (out / "captures").exists() and not (out / "work").exists()
    assert "### http-python (bulk)" in (out / "README.md").read_text()


def test_the_study_refuses_a_bad_path_in_one_line(tmp_path):
    assert_clean_error(run_magnet("experiment", "apps", "--paths", "60ms", "--out", tmp_path), "--paths", "60ms")
