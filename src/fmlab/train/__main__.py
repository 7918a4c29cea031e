"""`python -m fmlab.train ...` and `torchrun -m fmlab.train ...`: the training entry point."""

import sys

from fmlab.train.loop import main

if __name__ == "__main__":
    sys.exit(main())
