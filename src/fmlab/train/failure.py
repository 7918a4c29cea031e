"""What happens when a run of fmlab.train fails: the collective failure named, the job's failure file, the exit.

    trace = CollectiveTrace(cfg.trace_collectives, trace_dir(cfg), ...)  # each rank's trace goes there on a failure
    failure = collective_failure(error, cfg, trace)   # a CollectiveTimeout naming the rank that stopped, or `error`
    write_failure_file("rank 1 stopped: ...")         # SageMaker's FailureReason (the first rank to write wins)
    exit_process(main())                              # the entry scripts' last line: flush, leave, no teardown

A collective that waits --init-timeout or --collective-timeout seconds for a dead or hung peer (fmlab.train.loop
sets the two phases) fails the run with a CollectiveTimeout instead of waiting forever, and its message names the
rank that stopped, the collective and the step: every rank keeps its last `--trace-collectives` collectives
(PyTorch's Flight Recorder, fmlab.hangs.trace), each surviving rank writes its trace to
`--trace-dir` (trace_dir: default <output dir>/collective-traces) and they compare notes (fmlab.hangs.analysis;
`fmlab hangs DIR` reads the files afterwards). A peer that died (its connection closed) is named the same way, on
stderr, and the backend's own error is raised as it came. In a SageMaker job the verdict is also the job's failure
file (/opt/ml/output/failure: the job's FailureReason); main() exits 1, so torchrun's --max-restarts restarts the
workers. entrypoints/train.py and `python -m fmlab.train` end through exit_process, which leaves without
interpreter teardown.
Tested by tests/train/test_faults.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch.distributed as tdist

from fmlab.parallel.mesh import collective_timeout_error, peer_lost
from fmlab.train.config import TrainConfig

if TYPE_CHECKING:
    from fmlab.hangs.trace import CollectiveTrace


def trace_dir(cfg: TrainConfig) -> str:
    """Where each rank writes its collective trace when a collective fails ("" : nowhere, shared only)."""
    return cfg.trace_dir or (str(Path(cfg.output_dir) / "collective-traces") if cfg.output_dir else "")


def collective_failure(error: RuntimeError, cfg: TrainConfig, trace: CollectiveTrace) -> BaseException:
    """The error to raise for `error`: a CollectiveTimeout naming the rank that stopped, the collective and the
    step when a collective timed out; `error` itself otherwise. A peer that died is named on stderr and in the
    job's failure file (SageMaker's FailureReason), and the backend's own error is raised as it came."""
    lost = peer_lost(error)
    if collective_timeout_error(error, trace.timeout_s) is None and not lost:
        return error
    named = ""
    if tdist.is_available() and tdist.is_initialized():
        if lost:
            trace.gather_seconds = 1.0  # torchrun stops the survivors soon after a worker dies
        failure = trace.on_failure(error)
        if failure.report is not None and failure.report.ranks:
            named = failure.report.headline
        if failure.path is not None:
            print(f"collective trace: {failure.path} (`fmlab hangs {failure.path.parent}` compares the ranks')",
                  file=sys.stderr, flush=True)
    flag = "--collective-timeout" if trace.phase == "training" else "--init-timeout"
    timed_out = collective_timeout_error(error, trace.timeout_s, flag, named)
    if timed_out is None:
        said = f"a collective failed because a peer process closed its connection: {named or 'it died'}"
        print(f"error: {said}", file=sys.stderr, flush=True)
        write_failure_file(said)
        return error
    return timed_out


def write_failure_file(text: str, env=None) -> str:
    """Leave `text` as the job's failure reason, SageMaker's /opt/ml/output/failure (the sandbox's host folder
    gives its own path in SM_OUTPUT_FAILURE); the first rank to write wins. Returns the path, or "" outside a
    job."""
    env = os.environ if env is None else env
    path = env.get("SM_OUTPUT_FAILURE") or ("/opt/ml/output/failure" if "SM_TRAINING_ENV" in env else "")
    if not path:
        return ""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x") as f:  # exclusive: the ranks of one host share the file
            f.write(text[:1000] + "\n")
    except OSError:
        pass
    return path


def exit_process(code: int):
    """Leave the process with `code` once everything is flushed, without running interpreter teardown.

    A torchrun worker whose process group was given a timeout can abort at interpreter exit, after its work is
    done and its process group destroyed ("terminate called without an active exception", about 1 run in 10 on
    2 CPU cores with gloo and FSDP): a C++ thread is still joinable when static objects are destroyed. The
    checkpoints, logs and model are written and closed by then, so the entry scripts end here instead, and a
    finished job never reports a failure it did not have."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
