"""python -m magnet.capture build: build magnet-read now (into the per-user cache), print its path.
python -m magnet.capture preload: the same for libmagnet-preload.so (the capture without root).
python -m magnet.capture merge SPOOL [OUTPUT]: write the trace of a preload capture whose merge
failed (a full disk) from the spool it kept, to OUTPUT or the capture's own output."""
import sys

from magnetlib.errors import MagnetError

from .preload import LIBRARY, Spool, build_library
from .session import build_magnet_read

USAGE = "usage: python -m magnet.capture build|preload|merge SPOOL [OUTPUT]"


def main(argv: list[str]) -> int:
    try:
        if argv == ["preload"]:
            print(build_library(quiet=False) / LIBRARY)
        elif argv == ["build"]:
            print(build_magnet_read(quiet=False) / "magnet-read")
        elif argv[:1] == ["merge"] and len(argv) in (2, 3):
            spool = Spool.reopen(argv[1])
            records, lost = spool.merge(output=argv[2] if len(argv) == 3 else None)
            print(f"{argv[2] if len(argv) == 3 else spool.output}: {records} records, {lost} lost")
        else:
            print(USAGE, file=sys.stderr)
            return 2
    except MagnetError as e:
        print(f"magnet.capture: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
