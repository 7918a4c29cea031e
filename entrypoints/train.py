"""SageMaker's entry script: a thin wrapper that runs fmlab's training entry point, `fmlab.train.main`.

    ModelTrainer(source_code=SourceCode(source_dir=<repo root>, entry_script="entrypoints/train.py"), ...)
    torchrun --nproc-per-node 2 entrypoints/train.py --model tiny --max-steps 20    # the same, locally

SageMaker's torchrun/mpirun drivers start a *script*, not a module, so this file exists; all logic lives in
fmlab.train. When fmlab is not installed in the container, the repository's src/ folder (uploaded with the
source dir) is put on the path.
"""

import sys
from pathlib import Path

try:
    from fmlab.train import exit_process, main
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from fmlab.train import exit_process, main

if __name__ == "__main__":
    exit_process(main())  # flushes, then leaves without interpreter teardown (see exit_process)
