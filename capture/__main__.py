"""python -m magnet.capture build: build magnet-read now (into the per-user cache), print its path."""
import sys

from .session import CaptureError, build_magnet_read


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python -m magnet.capture build", file=sys.stderr)
        return 2
    try:
        print(build_magnet_read(quiet=False) / "magnet-read")
    except CaptureError as e:
        print(f"magnet.capture: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
