"""`python -m fmlab.train ...` and `torchrun -m fmlab.train ...`: the training entry point."""

import gc

if __name__ == "__main__":  # before torch and transformers are imported (fmlab.train.collector)
    gc.disable()

from fmlab.train.handoff import handoff  # noqa: E402

if __name__ == "__main__":
    handoff()  # does nothing unless FMLAB_WORKER_ZYGOTES asks for a pre-imported worker (the test suite does)

from fmlab.train.failure import exit_process  # noqa: E402
from fmlab.train.loop import main  # noqa: E402

if __name__ == "__main__":
    exit_process(main())
