"""The training entry point and everything a run needs: config, loop, logs (checkpoints: fmlab.checkpoint).

    python -m fmlab.train --model tiny --max-steps 20                        # one process
    torchrun --nproc-per-node 2 -m fmlab.train --model tiny --sharding full  # two gloo processes on a CPU
    from fmlab.train import TrainConfig, train                               # the same, from Python

Files, in the order data flows through a run:
- config.py             TrainConfig (with the run's ParallelConfig): flags, SageMaker's extra arguments and SM_*
                        defaults, its check(), the LR schedule
- planned.py            the planned run (fmlab.plan.planned) as a TrainConfig and flags, and any artefact's settings
                        held against it again
- loop.py               train(): data -> model -> parallelize -> train_step() x N -> checkpoints (fmlab.checkpoint,
                        the floor below: Checkpointer, export_hf); the two collective-timeout phases; main() parses
                        flags
- step.py               train_step(): one optimizer step (micro-batches, clip, step); build_optimizer (AdamW and its
                        schedule), the batches, the gradient dump (--save-first-grads)
- loss.py               the chunked loss (--loss chunked: never the whole vocabulary's logits) and where the full
                        one runs instead (use_chunked_loss_where_layout_allows)
- failure.py            when a run fails: the collective that timed out named (traces compared), the job's failure
                        file (SageMaker's FailureReason), exit_process (the entry scripts' exit)
- log.py                the step log (stdout lines SageMaker's metric regexes read, TensorBoard, JSONL) and
                        StepTimer, the clocks behind its throughput
- evaluate.py           held-out loss on the dataset's validation split (the ladder's gate, module 10)
- collector.py          Python's garbage collector during training: a pass every 50 steps on every rank at once
                        (torchtitan's gc_freq), not at random moments
- faults.py             fault injection for recovery drills: kill, hang, freeze or stall a rank, make it skip an
                        all-reduce, kill it mid-save
- local.py              torchrun_train(): run the entry point here with N processes (notebooks)
- cache.py              train_cached(): a run trained once per content (code, settings, data) under build/cache/runs/

The names below are loaded on first use, so `fmlab.train.log` stays light for the jobs layer.
"""

import importlib

_EXPORTS = {"TrainConfig": "config", "TrainConfigError": "config", "parse_config": "config",
            "sagemaker_defaults": "config", "warmup_cosine": "config",
            "TrainResult": "loop", "train": "loop", "main": "loop",
            "train_step": "step", "build_optimizer": "step",
            "exit_process": "failure",
            "torchrun_train": "local"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"fmlab.train.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'fmlab.train' has no attribute {name!r}")
