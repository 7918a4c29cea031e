"""A downstream evaluation the way pretraining teams run one: an lm-evaluation-harness task defined in this repo.

    items = build_items(course_dataset(validation_units=2), count=240)   # from the held-out split only
    write_items(items)                                   # -> src/fmlab/serve/tasks/fmlab_cloze.jsonl (committed)
    contamination(items, data)                           # how many items' text also occurs in the training split
    result = run_lm_eval("runs/export")                  # lm_eval.simple_evaluate, model type "hf", on CPU
    result.accuracy, result.stderr, result.chance        # e.g. 0.55 +- 0.03 against 0.25

The task, `fmlab_cloze` (tasks/fmlab_cloze.yaml), is next-word cloze on held-out sentences: a line of text
from the validation split cut before one of its words, and four candidate next words, the true one and three
distractors drawn from the other items' answers **with the same number of tokens** (so an untrained model,
whose predictions are close to uniform, gains nothing from the candidates' lengths and scores at chance, 25%).
lm-eval scores each candidate by the log-likelihood the model gives it after the context and counts the item
right when the true word scores highest (`acc`), the multiple-choice scheme of its LAMBADA-, HellaSwag- and
ARC-style tasks. The items come from `PackedDataset(split="validation")`, text that training never reads;
`contamination` still checks it, the way real runs check benchmark items against their training data.

Everything is local: the task's YAML names a loader (tasks/cloze_task.py) that reads the JSONL next to it, and
`run_lm_eval` builds lm-eval's TaskManager on this folder only (include_defaults=False: none of lm-eval's
thousands of built-in tasks, and nothing downloaded).
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmlab.data import PackedDataset
from fmlab.serve.export import check_model_folder

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
TASK = "fmlab_cloze"
ITEMS_FILE = TASKS_DIR / f"{TASK}.jsonl"
CHOICES = 4
_WORD = re.compile(r"(?<= )[A-Za-z]+(?=[\s,.;:!?'\"-]|$)")


@dataclass(frozen=True)
class LmEvalResult:
    """The figures of one lm-eval run of the cloze task."""

    model: str
    accuracy: float
    stderr: float
    items: int
    chance: float = 1 / CHOICES
    seconds: float = 0.0

    @property
    def above_chance_sigmas(self) -> float:
        return (self.accuracy - self.chance) / self.stderr if self.stderr else float("inf")


def split_text(data: str | Path, split: str) -> str:
    """The whole text of a dataset split, decoded with its own tokenizer (sequence after sequence)."""
    ds = PackedDataset(data, split=split)
    tokens = np.concatenate([ds.tokens(i) for i in range(len(ds))]) if len(ds) else np.zeros(0, dtype=np.int64)
    return ds.tokenizer().decode(tokens.tolist())


def build_items(data: str | Path, count: int = 240, seed: int = 0, min_words: int = 6) -> list[dict]:
    """`count` cloze items from the held-out split of `data` (deterministic for a seed)."""
    tokenizer = PackedDataset(data, split="validation").tokenizer()
    rng = random.Random(seed)
    candidates = []  # (context, answer word)
    for line in split_text(data, "validation").splitlines():
        line = line.strip()
        if len(line.split()) < min_words or "<|" in line:
            continue
        words = [m for m in _WORD.finditer(line) if m.start() > 0 and len(line[:m.start()].split()) >= 3]
        if words:
            m = rng.choice(words)
            candidates.append((line[:m.start()].rstrip(), m.group(0)))
    if not candidates:
        raise ValueError(f"no held-out line of {data} has {min_words} words or more to make cloze items from")
    rng.shuffle(candidates)
    by_length: dict[int, list[str]] = {}  # token count of " word" -> the answers that long
    for _, word in candidates:
        by_length.setdefault(len(tokenizer.encode(" " + word)), []).append(word)
    items = []
    for context, word in candidates:
        pool = sorted({w for w in by_length[len(tokenizer.encode(" " + word))] if w.lower() != word.lower()})
        if len(pool) < CHOICES - 1:
            continue
        choices = [word, *rng.sample(pool, CHOICES - 1)]
        rng.shuffle(choices)
        items.append({"context": context, "choices": [" " + c for c in choices], "label": choices.index(word)})
        if len(items) == count:
            break
    return items


def write_items(items: list[dict], path: str | Path = ITEMS_FILE) -> Path:
    """The items as JSON lines (the task's data file)."""
    path = Path(path)
    path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items))
    return path


def read_items(path: str | Path = ITEMS_FILE) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def contamination(items: list[dict], data: str | Path, words: int = 8) -> dict:
    """How many items' last `words` words of context plus the answer occur verbatim in the training split:
    the n-gram overlap check of published runs (GPT-3 used 13-grams, see the notebook), here on 8 words."""
    train = " ".join(split_text(data, "train").split())
    hits = []
    for i, item in enumerate(items):
        tail = " ".join(item["context"].split()[-(words - 1):]) + item["choices"][item["label"]]
        if tail in train:
            hits.append(i)
    return {"items": len(items), "contaminated": len(hits), "share": len(hits) / max(1, len(items)),
            "examples": [items[i]["context"][-60:] + items[i]["choices"][items[i]["label"]] for i in hits[:3]]}


def run_lm_eval(model_dir: str | Path, limit: int | None = None, batch_size: int = 32,
                tasks_dir: str | Path = TASKS_DIR) -> LmEvalResult:
    """Run the cloze task on an exported Hugging Face folder with lm_eval.simple_evaluate (model type "hf", CPU)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    folder = check_model_folder(model_dir)
    for name in ("lm-eval", "lm_eval", "lm_eval.models.huggingface", "lm_eval.evaluator"):
        logging.getLogger(name).setLevel(logging.ERROR)
    start = time.perf_counter()
    quiet = {"TQDM_DISABLE": "1"}  # lm-eval's progress bars
    previous = {k: os.environ.get(k) for k in quiet}
    os.environ.update(quiet)
    try:
        manager = TaskManager(include_path=str(tasks_dir), include_defaults=False)
        out = lm_eval.simple_evaluate(model="hf", model_args={"pretrained": str(folder), "dtype": "float32"},
                                      tasks=[TASK], device="cpu", batch_size=batch_size, limit=limit,
                                      task_manager=manager, log_samples=False, bootstrap_iters=0)
    finally:
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    metrics = out["results"][TASK]
    n = out["n-samples"][TASK]["effective"] if "n-samples" in out else len(read_items())
    acc = float(metrics["acc,none"])
    stderr = metrics.get("acc_stderr,none")
    if not isinstance(stderr, int | float):  # bootstrap off: the binomial standard error
        stderr = (acc * (1 - acc) / max(1, n - 1)) ** 0.5
    return LmEvalResult(str(folder), acc, float(stderr), int(n), seconds=time.perf_counter() - start)


__all__ = ["CHOICES", "ITEMS_FILE", "LmEvalResult", "TASK", "TASKS_DIR", "build_items", "contamination",
           "read_items", "run_lm_eval", "split_text", "write_items"]
