"""Checks for labs/lab_10_eval_gate.ipynb: the evaluation gate between two phases of a pretraining run.

    lab10.check_perplexity(heldout_perplexity)        # ex1: held-out perplexity of a model == the reference's
    lab10.check_curve(evaluate_run)                   # ex2: every checkpoint of a run, scored, oldest first
    lab10.check_gate(gate)                            # ex3: go on an improving run; stop on a diverging one
    lab10.summary()                                   # raises LabIncomplete while any check fails

The runs are real: `runs()` trains the course's tiny Llama twice with the training entry point
(`fmlab.train.loop.train`, one process), RUN_STEPS steps each with a checkpoint every CHECKPOINT_EVERY steps,
on the course dataset with its held-out split (module 2, `validation_units=2`):
* "improving": learning rate 1e-2 with warm-up and cosine decay, the course's usual settings;
* "diverging": learning rate 1.0 (100x), warmed up over the whole run, no gradient clipping: the held-out
  loss falls at first, then rises as the learning rate grows (measured: best near step 30, then up by 0.8 nats).
They are trained once into runs/lab10/ (or the notebook's work_dir; about 10 s on 2 cores) and reused by later
runs of the notebook; a run with the same configuration, data and code is trained only once on this machine
(fmlab.train.cache, build/cache/runs/) and copied into every other work_dir, so the solved and the unsolved lab
of one test run share it.

What is compared. Ex1: the learner's perplexity of the untrained model and of the improving run's last
checkpoint against exp(fmlab.train.evaluate.heldout_loss) on the same SEQUENCES held-out sequences, relative
tolerance 1e-4 (float32, summation order may differ). Ex2: the learner's (step, perplexity) list for both runs
against `fmlab.serve.heldout.checkpoint_curve`, same steps in the same order, same tolerance. Ex3: the learner's
gate on four curves: the two runs (go, stop), a run that never beat the baseline (stop) and one whose loss
became nan (stop), the verdicts of `fmlab.serve.heldout.decide` with its default GateRule (10% below the
baseline's perplexity; no evaluation more than 5% above the best one after it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from fmlab.labs import Lab

LAB = Lab("lab 10", ["ex1_perplexity", "ex2_curve", "ex3_gate"])

MODEL = "tiny"
SEQUENCES = 32  # held-out sequences every evaluation uses (the first 32 of the validation split)
MICRO_BATCH = 16
RUN_STEPS = 60
CHECKPOINT_EVERY = 10
RUNS = {  # name -> TrainConfig overrides
    "improving": {"lr": 1e-2, "warmup_steps": 5, "grad_clip": 1.0},
    "diverging": {"lr": 1.0, "warmup_steps": RUN_STEPS, "min_lr_ratio": 1.0, "grad_clip": 0.0},
}
RTOL = 1e-4
EXPECTED = {"improving": True, "diverging": False, "stalled": False, "nan": False}


def data() -> Path:
    """The course dataset with its held-out split (prepared once, shared with the other notebooks)."""
    from fmlab.data import course_dataset

    return course_dataset(seq_len=128, vocab_size=512, validation_units=2)


def validation():
    """The held-out split: PackedDataset(split="validation")."""
    from fmlab.data import PackedDataset

    return PackedDataset(data(), split="validation")


_WORK: list[Path] = []  # the folder the runs were trained into (the notebook's work_dir), once chosen


def _root() -> Path:
    from fmlab.environment import ROOT

    return _WORK[-1] if _WORK else ROOT / "runs" / "lab10"


def runs(root: str | Path | None = None) -> dict[str, Path]:
    """name -> checkpoint folder of the lab's two runs, trained once (reused when their last checkpoint exists)."""
    from fmlab.checkpoint import complete_checkpoints
    from fmlab.train.cache import train_cached
    from fmlab.train.loop import TrainConfig

    root = Path(root) if root else _root()
    if root != _root():
        _WORK.append(root)  # the checks use the same runs
    out = {}
    for name, overrides in RUNS.items():
        folder = root / name / "checkpoints"
        done = complete_checkpoints(folder)
        if not done or done[-1].step != RUN_STEPS:
            cfg = TrainConfig(model=MODEL, data=str(data()), max_steps=RUN_STEPS, micro_batch=MICRO_BATCH,
                              log_every=RUN_STEPS, tensorboard=False, checkpoint_dir=str(folder),
                              checkpoint_every=CHECKPOINT_EVERY, keep_checkpoints=RUN_STEPS, resume="none",
                              **overrides)
            train_cached(cfg)  # trained once per content (build/cache/runs/), then copied
        out[name] = folder
    return out


def complete_checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete checkpoint in `folder`, oldest first (the COMPLETE marker decides)."""
    from fmlab.checkpoint import complete_checkpoints as found

    return [(info.step, info.path) for info in found(folder)]


def load_model(path: str | Path):
    """The model saved in one checkpoint, on this process."""
    from fmlab.serve.heldout import load_checkpoint_model

    return load_checkpoint_model(path, MODEL)


def untrained_model():
    from fmlab.models import build_model

    return build_model(MODEL)


def reference_perplexity(model) -> float:
    from fmlab.train.evaluate import heldout_loss

    return math.exp(heldout_loss(model, validation(), SEQUENCES, MICRO_BATCH))


def reference_curve(folder) -> list[tuple[int, float]]:
    from fmlab.serve.heldout import checkpoint_curve

    return [(c.step, c.perplexity) for c in checkpoint_curve(folder, MODEL, data(), SEQUENCES, MICRO_BATCH)]


def baseline_perplexity() -> float:
    return reference_perplexity(untrained_model())


def _close(a, b) -> bool:
    return isinstance(a, int | float) and (math.isclose(a, b, rel_tol=RTOL) or (math.isnan(a) and math.isnan(b)))


def _not_answered(e: Exception) -> bool:
    return isinstance(e, NotImplementedError)


def check_perplexity(heldout_perplexity: Callable) -> bool:
    """ex1: heldout_perplexity(model, dataset, sequences) on the untrained model and the improving run's end."""
    ex = "ex1_perplexity"
    if not callable(heldout_perplexity):
        return LAB.report(ex, False, "give the function heldout_perplexity itself (no parentheses)")
    last = complete_checkpoints(runs()["improving"])[-1]
    cases = {"the untrained model": untrained_model(), f"the improving run at step {last[0]}": load_model(last[1])}
    for what, model in cases.items():
        want = reference_perplexity(model)
        try:
            got = heldout_perplexity(model, validation(), SEQUENCES)
        except Exception as e:
            if _not_answered(e):
                return LAB.report(ex, False, "not answered yet. Hint: the mean of every predicted token's "
                                  "cross-entropy over the first `sequences` sequences, then exp")
            return LAB.report(ex, False, f"{what}: heldout_perplexity raised {type(e).__name__}: {e}")
        if not _close(float(got) if isinstance(got, int | float) else got, want):
            return LAB.report(ex, False, f"{what}: {got!r}, the reference gives {want:.4f}. Hint: average the "
                              "cross-entropy over every predicted token of the first `sequences` sequences "
                              "(model(input_ids=x, labels=x).loss is one batch's mean: weight it by the batch's "
                              "tokens), then take exp")
    return LAB.report(ex, True, f"perplexity {want:.2f} after {last[0]} steps, against about 512 untrained "
                      "(the vocabulary size: a uniform guess)")


def check_curve(evaluate_run: Callable) -> bool:
    """ex2: evaluate_run(folder) -> [(step, perplexity), ...] for both runs."""
    ex = "ex2_curve"
    if not callable(evaluate_run):
        return LAB.report(ex, False, "give the function evaluate_run itself (no parentheses)")
    for name, folder in runs().items():
        try:  # the learner's answer first: the reference curve evaluates every checkpoint, not worth it for a stub
            got = [(int(s), float(p)) for s, p in evaluate_run(folder)]
        except Exception as e:
            if _not_answered(e):
                return LAB.report(ex, False, "not answered yet. Hint: lab10.complete_checkpoints(folder), then "
                                  "lab10.load_model(path) and your heldout_perplexity for each")
            return LAB.report(ex, False, f"the {name} run: evaluate_run raised {type(e).__name__}: {e}")
        want = reference_curve(folder)
        if [s for s, _ in got] != [s for s, _ in want]:
            return LAB.report(ex, False, f"the {name} run: steps {[s for s, _ in got]}, expected "
                              f"{[s for s, _ in want]} (every complete checkpoint, oldest first)")
        for (step, p), (_, q) in zip(got, want, strict=True):
            if not _close(p, q):
                return LAB.report(ex, False, f"the {name} run, step {step}: perplexity {p:.4f}, the reference "
                                  f"gives {q:.4f}")
    return LAB.report(ex, True, "both runs' curves equal the reference, checkpoint by checkpoint")


def test_curves() -> dict[str, list[tuple[int, float]]]:
    """The four curves the gate is checked on: the two runs, a stalled one, and one that became nan."""
    curves = {name: reference_curve(folder) for name, folder in runs().items()}
    base = baseline_perplexity()
    curves["stalled"] = [(10, base * 0.99), (20, base * 0.97), (30, base * 0.96)]
    curves["nan"] = [(10, base * 0.5), (20, base * 0.4), (30, math.nan)]
    return curves


def check_gate(gate: Callable) -> bool:
    """ex3: gate(curve, baseline_perplexity) -> (go, reason) on four curves."""
    from fmlab.serve.heldout import CheckpointScore, decide

    ex = "ex3_gate"
    if not callable(gate):
        return LAB.report(ex, False, "give the function gate itself (no parentheses)")
    base = baseline_perplexity()
    not_answered = ("not answered yet. Hint: go only if the last perplexity is 10% below the baseline, every value "
                    "is finite, and nothing after the best is 5% above it")
    try:  # a stub first, on a curve that costs nothing, before the runs' curves are evaluated
        gate([(10, base * 0.99)], base)
    except Exception as e:
        if _not_answered(e):
            return LAB.report(ex, False, not_answered)
    for name, curve in test_curves().items():
        reference = decide([CheckpointScore(s, math.log(p) if p > 0 else math.nan) for s, p in curve], math.log(base))
        assert reference.go == EXPECTED[name], f"the lab's {name} run no longer behaves as designed: {reference.reason}"
        try:
            answer = gate(curve, base)
        except Exception as e:
            if _not_answered(e):
                return LAB.report(ex, False, not_answered)
            return LAB.report(ex, False, f"the {name} curve: gate raised {type(e).__name__}: {e}")
        if not (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], str) and answer[1]):
            return LAB.report(ex, False, f"gate must return (go, reason), a bool and a non-empty string; got {answer!r}")
        if bool(answer[0]) != reference.go:
            return LAB.report(ex, False, f"the {name} curve: your gate says {'go' if answer[0] else 'stop'}, it should "
                              f"say {'go' if reference.go else 'stop'}: {reference.reason}")
    return LAB.report(ex, True, "go on the improving run; stop on the diverging, the stalled and the nan run")


def summary() -> None:
    LAB.summary()
