"""Every native part is built one way: its Makefile run into the per-user cache
(magnetlib.buildcache.make), once per version of its sources; what is missing, or
the build's first error, is one BuildError."""
import pytest

from magnet.capture import preload
from magnetlib import buildcache
from magnetlib.errors import BuildError

from .conftest import require_tool

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

MAKEFILE = """OUTPUT ?= build
CC ?= cc
$(OUTPUT)/hello: hello.c
\t@mkdir -p $(OUTPUT)
\t$(CC) -O2 -o $@ $<
"""


@pytest.fixture
def source(tmp_path):
    """A one-program source tree and its files."""
    require_tool("make")
    require_tool("cc")
    src = tmp_path / "src"
    src.mkdir()
    (src / "Makefile").write_text(MAKEFILE)
    (src / "hello.c").write_text("int main(void) { return 0; }\n")
    return src, [(name, src / name) for name in ("Makefile", "hello.c")]


def test_built_once_per_version_of_the_sources(source, tmp_path):
    src, files = source
    first = buildcache.make("hello", src, files, base=tmp_path / "cache")
    stamp = (first / "hello").stat().st_mtime_ns
    assert buildcache.make("hello", src, files, base=tmp_path / "cache") == first
    assert (first / "hello").stat().st_mtime_ns == stamp            # not built again
    (src / "hello.c").write_text("int main(void) { return 1; }\n")
    assert buildcache.make("hello", src, files, base=tmp_path / "cache") != first


def test_a_failed_build_says_its_first_error(source, tmp_path):
    src, files = source
    (src / "hello.c").write_text("int main(void) { return undeclared; }\n")
    with pytest.raises(BuildError, match=r"^hello: hello\.c:1:.*error: .undeclared. undeclared"):
        buildcache.make("hello", src, files, base=tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*/.complete"))       # nothing that looks built


def test_a_missing_tool_is_named_with_its_package(source, tmp_path):
    src, files = source
    with pytest.raises(BuildError, match=r"^hello: building it needs magnet-no-such-tool, "
                                         r"/no/such/header\.h \(Debian: apt-get install"):
        buildcache.make("hello", src, files, needs=("make", "cc", "magnet-no-such-tool", "/no/such/header.h"),
                        base=tmp_path / "cache")


def test_without_make_or_a_compiler_nothing_runs(tmp_path, monkeypatch):
    """What a machine without gcc and make hears when the capture without root is built."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("MAGNET_CACHE", str(tmp_path / "cache"))
    with pytest.raises(BuildError, match=r"^libmagnet-preload\.so: building it needs make, cc "
                                         r"\(Debian: apt-get install make gcc\)$"):
        preload.build_library()
    assert not (tmp_path / "cache").exists()
