"""`python -m fmlab.sandbox run <job folder>`: the supervisor that `fmlab.sandbox.submit` starts (not for people)."""

import sys
from pathlib import Path

from fmlab.sandbox.supervisor import Supervisor


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "run":
        print("usage: python -m fmlab.sandbox run <job folder>   (started by fmlab.sandbox.submit)", file=sys.stderr)
        return 2
    Supervisor(Path(argv[1])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
