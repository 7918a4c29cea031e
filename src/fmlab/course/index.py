"""The course index, notebooks/index.ipynb: every module in order with one line, its lab and its slide deck.

    python -m fmlab.course.index           # rewrite notebooks/index.ipynb from what is on disk
    python -m fmlab.course.index --check   # exit 1 (and say so) when the committed index is out of date

`make lab` opens this index. It is generated, so it grows with the course: a module's notebooks
(notebooks/NN_*.ipynb, in name order when a module has two), lab (labs/lab_NN_*.ipynb, solution in
labs/solutions/; a further lab labs/lab_NNx_*.ipynb) and deck (slides/NN_*.md, built to build/slides/NN_*.html)
are found by their number and linked; titles come from each file's first `# heading`; the one-line summaries are
below. tests/course/test_course_index.py fails while the index is stale.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.environment import ROOT

INDEX = ROOT / "notebooks" / "index.ipynb"

# One line per module: what a learner will be able to do after it (the course plan in COURSE-TOPICS).
SUMMARIES = {
    "00": "check your environment and see whether jobs run on this machine or on SageMaker",
    "01": "decide whether to pretrain, then plan the FLOPs, days, cost and memory of a run",
    "02": "tokenize and pack a corpus share-nothing, and feed it from S3, FSx for Lustre or local NVMe",
    "03": "launch many training jobs at once, keep warm pools, and plan around quotas and IAM roles",
    "04": "train with data parallelism: all-reduce, PyTorch DDP and SageMaker's SMDDP backend",
    "05": "shard the model state with ZeRO, FSDP and SMP v2: hybrid sharding, checkpointing and offloading "
          "activations",
    "06": "split layers with tensor parallelism and pipelines, and choose a 3-D layout for a large cluster",
    "07": "plan a sharded GPT-30B run, climb a gated scaling ladder, launch it with SMP v2 on EFA, and run its "
          "laptop twin",
    "08": "survive failures at scale: checkpoint cadence, atomic and asynchronous saves, killed, hung and "
          "resharded runs, retries",
    "09": "move Llama checkpoints to and from Neuron Distributed on Trainium, and plan a trn1 job",
    "10": "gate a run on held-out perplexity, evaluate with lm-eval, export the model, and serve it locally and "
          "on a SageMaker endpoint",
    "11": "reserve capacity with training plans, run the training script on a real Slurm as on HyperPod, bring it "
          "back after a fault, and weigh tiered and checkpointless recovery",
    "12": "plan a whole run as ten decisions, simulate it under stated chances, read which assumptions it rests on, "
          "and write a planner graded on briefs drawn when it is checked",
}
PLANNED_TITLES = {
    "00": "Setup", "01": "When to pretrain", "02": "Data at scale", "03": "Parallel jobs and warm pools",
    "04": "Data parallelism", "05": "Sharded data parallelism", "06": "Tensor and pipeline parallelism",
    "07": "Hands-on: a sharded GPT-30B run", "08": "Checkpointing and recovery", "09": "Trainium",
    "10": "Evaluate, export and serve", "11": "Pretraining on AWS in 2026",
}

INTRO = """# Pretraining Foundation Models on AWS: course index

Start here. The course is a sequence of notebooks, each a module that runs top to bottom on its own: on a
laptop CPU with tiny models in about a minute, or against real Amazon SageMaker jobs when you have an AWS
account (notebook 00 tells you which one you have). Work through them in order; each has a **lab** in which
you build the mechanism the module teaches, and a **slide deck** with the same ideas in brief.

**Kernel.** Use the kernel **fmlab (Python 3.11)** (`make lab` registers it; in SageMaker Studio pick it in
the kernel selector). The notebooks also run on the plain *Python 3 (ipykernel)* kernel of the course's
environment.

**Labs.** Open a lab and write the code where it says `# your code here` (a function body, a class, a
protocol). Each check runs your code on 2 to 4 real processes of this machine (gloo) and compares it with a
single-process reference: it prints PASS, or FAIL with what differed (which tensor, by how much, at which
step). The last cell fails until every exercise passes. The solved twins are in `labs/solutions/`; try first.

**Slides.** `make slides` builds every deck to `build/slides/` (open `build/slides/index.html` in a browser;
in JupyterLab, right-click a deck in the file browser and choose *Open in New Browser Tab*). They work
offline.

**Run everything.** `make course` executes every notebook and lab solution headless and writes
`build/course-report.html`: status, seconds and the key figures each notebook recorded."""


@dataclass
class Module:
    number: str
    notebook: Path | None = None
    lab: Path | None = None
    solution: Path | None = None
    deck: Path | None = None
    more_labs: list[tuple[Path, Path | None]] = field(default_factory=list)  # lab_NNx_*: a module's further labs
    more_notebooks: list[Path] = field(default_factory=list)  # NN_*: a module's further notebooks, in name order


def _first(folder: Path, pattern: str) -> Path | None:
    found = sorted(folder.glob(pattern))
    return found[0] if found else None


def find_modules(root: Path = ROOT) -> list[Module]:
    """Modules 00-09 of the plan, plus any other number that has a notebook, lab or deck on disk."""
    numbers = set(SUMMARIES)
    for pattern, folder in (("[0-9][0-9]_*.ipynb", "notebooks"), ("lab_[0-9][0-9]_*.ipynb", "labs"),
                            ("[0-9][0-9]_*.md", "slides")):
        numbers |= {re.search(r"\d\d", p.name).group(0) for p in (root / folder).glob(pattern)}
    return [Module(n, _first(root / "notebooks", f"{n}_*.ipynb"), _first(root / "labs", f"lab_{n}_*.ipynb"),
                   _first(root / "labs" / "solutions", f"lab_{n}_*.ipynb"), _first(root / "slides", f"{n}_*.md"),
                   [(p, _first(root / "labs" / "solutions", p.name))
                    for p in sorted((root / "labs").glob(f"lab_{n}[a-z]_*.ipynb"))],
                   sorted((root / "notebooks").glob(f"{n}_*.ipynb"))[1:])
            for n in sorted(numbers)]


def heading(path: Path) -> str:
    """The first `# heading` of a notebook or Markdown file, without its "NN ·" or "Lab NN ·" prefix."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    line = next((ln[2:].strip() for ln in text.splitlines() if ln.startswith("# ")), path.stem)
    line = re.sub(r"\s*\(solution\)$", "", line)  # a solution's title names the lab it solves
    return re.sub(r"^(Lab\s+)?\d\d[a-z]?\s*·\s*", "", line)


def _row(m: Module) -> str:
    summary = SUMMARIES.get(m.number, "")
    if m.notebook:
        notebook = ", then ".join(f"[{heading(p)}]({p.name})" for p in [m.notebook, *m.more_notebooks]) + f": {summary}"
    else:
        notebook = f"{PLANNED_TITLES.get(m.number, 'Module ' + m.number)}: {summary} *(in preparation)*"
    labs = []
    for path, solution in ([(m.lab, m.solution)] if m.lab else []) + m.more_labs:
        text = f"[{heading(path)}](../labs/{path.name})"
        if solution:
            text += f" ([solution](../labs/solutions/{solution.name}))"
        labs.append(text)
    lab = "; ".join(labs)
    deck = ""
    if m.deck:
        deck = f"[deck](../build/slides/{m.deck.with_suffix('.html').name}) ([source](../slides/{m.deck.name}))"
    return f"| {m.number} | {notebook} | {lab} | {deck} |"


def modules_markdown(modules: list[Module]) -> str:
    rows = "\n".join(_row(m) for m in modules)
    return ("## The modules, in order\n\n"
            "| module | notebook: what you will be able to do | lab | slides |\n| --- | --- | --- | --- |\n" + rows)


def paths_markdown() -> str:
    """The workshop paths (fmlab.course.paths) as the index shows them."""
    from fmlab.course import paths, times

    return ("## Paths: one day, two days, the full course\n\n"
            "Each path keeps the spine: parallel jobs and warm pools, data parallelism with SMDDP, sharded training "
            "with SMP v2 and the 30B run, the Trainium conversion, the capstone. § names the sections a path "
            "takes; each notebook's second cell says the same.\n\n" + paths.table_markdown()
            + f"\nMinutes: {times.METHOD}. The instructor's guide: `docs/instructor.md`.")


def index_notebook(root: Path = ROOT) -> str:
    """The index as .ipynb JSON text; deterministic, so a regenerated index equals the committed one."""
    def cell(cell_id: str, kind: str, source: str, tags: list[str] | None = None) -> dict:
        out = {"cell_type": kind, "id": cell_id, "metadata": {"tags": tags} if tags else {},
               "source": source.splitlines(keepends=True)}
        if kind == "code":
            out |= {"execution_count": None, "outputs": []}
        return out

    nb = {
        "cells": [cell("intro", "markdown", INTRO), cell("parameters", "code", "", ["parameters"]),
                  cell("paths", "markdown", paths_markdown()),
                  cell("modules", "markdown", modules_markdown(find_modules(root)))],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fmlab.course.index", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether the index is up to date")
    args = parser.parse_args(argv)
    text = index_notebook()
    current = INDEX.read_text(encoding="utf-8") if INDEX.exists() else ""
    if args.check:
        if current != text:
            print(f"{INDEX.relative_to(ROOT)} is out of date: run `python -m fmlab.course.index`", file=sys.stderr)
            return 1
        print(f"{INDEX.relative_to(ROOT)} is up to date")
        return 0
    INDEX.write_text(text, encoding="utf-8")
    print(f"wrote {INDEX.relative_to(ROOT)} ({len(find_modules())} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
