"""Hang diagnosis (module 8): each rank's last collectives, kept while training, and the analyzer that reads them
to name the rank that stopped, the collective it did not enter and the step.

    from fmlab.hangs import CollectiveTrace, analyze, load_traces
    trace = CollectiveTrace(entries=2000, folder="out/collective-traces")   # the training loop keeps one per rank
    trace.on_failure(error).report        # on a failed collective: rank-N.json written, shared, analyzed
    print(analyze(load_traces("out/collective-traces")))   # "rank 1 stopped: it never entered collective #37 ..."
    fmlab hangs out/collective-traces     # the same from the command line

Files:
- trace.py     CollectiveTrace: PyTorch's Flight Recorder (gloo and NCCL) plus the training step of each
               collective; on a failure each surviving rank writes rank-N.json, publishes it through the
               rendezvous store and gathers the others' (fmlab.train.loop keeps one; fmlab.train.failure uses it)
- analysis.py  analyze / load_traces / HangReport: missing, behind or out of step (desync), in which collective,
               at which step

Above the engine: trace.py reads the restart attempt from fmlab.parallel.mesh; the engine never imports this
room. Importing it loads no torch: CollectiveTrace (trace.py, which imports torch.distributed) is loaded on first
use, so `fmlab hangs` and analysis.py read trace files without torch.
Tested by tests/parallel/test_hangs.py, tests/course/test_lab08b.py and tests/train/test_faults.py.
"""

import importlib

from fmlab.hangs.analysis import HangReport, analyze, load_traces

__all__ = ["CollectiveTrace", "HangReport", "analyze", "load_traces"]


def __getattr__(name: str):
    if name == "CollectiveTrace":
        return importlib.import_module("fmlab.hangs.trace").CollectiveTrace
    raise AttributeError(f"module 'fmlab.hangs' has no attribute {name!r}")
