"""`python -m fmlab.train ...` and `torchrun -m fmlab.train ...`: the training entry point."""

from fmlab.train.loop import exit_process, main

if __name__ == "__main__":
    exit_process(main())
