"""python -m magnet.capture build: build magnet-read now (into the per-user cache), print its path.
python -m magnet.capture preload: the same for libmagnet-preload.so (the capture without root)."""
import sys

from .preload import LIBRARY, build_library
from .session import CaptureError, build_magnet_read


def main(argv: list[str]) -> int:
    if argv not in (["build"], ["preload"]):
        print("usage: python -m magnet.capture build|preload", file=sys.stderr)
        return 2
    try:
        if argv == ["preload"]:
            print(build_library(quiet=False) / LIBRARY)
        else:
            print(build_magnet_read(quiet=False) / "magnet-read")
    except CaptureError as e:
        print(f"magnet.capture: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
