"""SageMaker's trn1 entry script: a thin wrapper that runs fmlab's Neuron (NxD) training, `fmlab.neuron.train.main`.

    ModelTrainer(source_code=SourceCode(source_dir=<repo root>, entry_script="entrypoints/neuron_train.py"), ...)
    torchrun --nproc-per-node 32 entrypoints/neuron_train.py --tensor_parallel_size 8 ...   # on an ml.trn1 node

fmlab.neuron.job builds that job. SageMaker's torchrun driver starts a *script*, not a module, so this file
exists; all logic lives in fmlab.neuron.train. When fmlab is not installed in the Neuron container, the
repository's src/ folder (uploaded with the source dir) is put on the path.
"""

import sys
from pathlib import Path

try:
    from fmlab.neuron.train import main
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from fmlab.neuron.train import main

if __name__ == "__main__":
    sys.exit(main())
