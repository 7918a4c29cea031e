"""`python -m fmlab.train ...` and `torchrun -m fmlab.train ...`: the training entry point."""

from fmlab.train.failure import exit_process
from fmlab.train.loop import main

if __name__ == "__main__":
    exit_process(main())
