"""python -m magnet.replay.linkem build: compile the link emulator now, print where it is."""
import sys

from magnetlib.errors import MagnetError

from . import build

if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        print("usage: python -m magnet.replay.linkem build", file=sys.stderr)
        sys.exit(2)
    try:
        print(build(quiet=False))
    except MagnetError as e:
        print(f"magnet: {e}", file=sys.stderr)
        sys.exit(2)
