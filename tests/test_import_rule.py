"""The import rule (issue 38, item 5): a torch-side file says what it needs at its top; only the torch-free floor
imports lazily.

The rule. In the torch-side packages (fmlab.train, fmlab.parallel, fmlab.checkpoint, fmlab.measure, fmlab.hangs,
fmlab.models, fmlab.data, fmlab.serve, fmlab.neuron) every `import` and `from ... import` sits at the top of its
file. An import inside a function is allowed only for a module in ALLOWED below, each with its reason:
- a package that is not installed everywhere (SageMaker's SMP and SMDDP, the Neuron stack, the course extra's
  evaluation and serving clients), or one guarded by `except ImportError`;
- a heavy tool that only one kind of call needs (matplotlib for figures, the SageMaker SDK for endpoint requests);
- an import that keeps a module the torch-free floor reads free of torch (fmlab.train.config, fmlab.train.log,
  fmlab.data: the jobs layer and `fmlab data prepare` import them), or one that breaks a genuine import cycle
  (listed as (file, module, reason); none is needed today: every other import moved to the top made no cycle).
Why: an import inside a function hides the file's dependencies (from the reader, from the layout check's picture
of who imports whom), and a missing or broken dependency then fails at the first call instead of at import.
A package's `__getattr__` that loads a submodule on first use (fmlab.train, fmlab.checkpoint, fmlab.hangs) is not
an import statement and is how a package stays light while its files import at the top.

Not held to it: the torch-free floors (fmlab.plan, fmlab.service, fmlab.jobs, fmlab.course_jobs, fmlab.cli) and
labs/, course/, sandbox/, hyperpod/, environment.py, storage.py, progress.py. Their lazy imports are the point:
they keep `import fmlab.plan`, `fmlab --help` and the jobs layer free of torch and of the SageMaker SDK, which
test_the_floor_imports_without_torch checks in fresh interpreters.

Run: .venv/bin/pytest tests/test_import_rule.py -q   (the rule: under a second; the floor: about 1 s a module)
A failure lists each offending `file:line import`: move the import to the file's top (`ruff check --fix` sorts
it), or add the module to ALLOWED with its reason. An ALLOWED entry that matches no import fails too.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "fmlab"
TORCH_SIDE = ("train", "parallel", "checkpoint", "measure", "hangs", "models", "data", "serve", "neuron")

# (file under src/fmlab, a glob; the module imported, it and its submodules; why the import waits for the call)
NOT_EVERYWHERE = "installed only in some containers or with the course extra, so imported where it is used"
ALLOWED = [
    ("*", "torch.sagemaker", "SMP v2: only in SageMaker's SMP images; " + NOT_EVERYWHERE),
    ("*", "smdistributed", "SMDDP: only in SageMaker's PyTorch containers; " + NOT_EVERYWHERE),
    ("*", "torch_neuronx", "TorchNeuron: only on trn2/trn3; " + NOT_EVERYWHERE),
    ("*", "torch_xla", "the Neuron (trn1) containers' XLA; " + NOT_EVERYWHERE),
    ("*", "neuronx_distributed", "Neuron Distributed (trn1); " + NOT_EVERYWHERE),
    ("serve/*", "lm_eval", "lm-evaluation-harness (`fmlab[course]`); " + NOT_EVERYWHERE),
    ("serve/*", "openai", "the OpenAI client (`fmlab[course]`); " + NOT_EVERYWHERE),
    ("serve/*", "httpx", "httpx (`fmlab[course]`); " + NOT_EVERYWHERE),
    ("serve/tasks/*", "datasets", "Hugging Face datasets, lm-eval's dependency: loaded by lm-eval's task runner"),
    ("*", "matplotlib", "plotting (about 1 s to import): only the figure functions need it, not the tables, the "
                        "measurements or the tests that read them"),
    ("serve/endpoint.py", "sagemaker", "the SageMaker SDK takes seconds to import: loaded by the calls that build "
                                       "endpoint requests, as fmlab.jobs does"),
    ("hangs/trace.py", "torch._C._distributed_c10d", "a private function of torch's, guarded by ImportError: "
                                                     "builds without distributed or the Flight Recorder lack it"),
    ("train/log.py", "torch.utils.tensorboard", "tensorboard is optional (`fmlab[course]`), guarded by ImportError"),
    ("train/log.py", "torch", "fmlab.train.log stays torch-free: the jobs layer reads its METRIC_DEFINITIONS "
                              "(fmlab.jobs.request); torch only where a CUDA device is named"),
    ("data/dataset.py", "torch", "fmlab.data stays torch-free: the jobs layer (fmlab.jobs.job.course_dataset_uri) "
                                 "and `fmlab data prepare` with its worker processes import it; torch only where "
                                 "a sequence becomes a tensor"),
    ("data/tokenizer.py", "transformers", "transformers' tokenizer classes take seconds to import, and every worker "
                                          "of `fmlab data prepare` imports this file: tokenizing needs `tokenizers` "
                                          "alone"),
]

# The torch-free floor and the modules ALLOWED keeps light for it: each must import without loading torch.
TORCH_FREE = [
    ("fmlab.plan", "the planner: what notebooks and the calculator import first"),
    ("fmlab.service", "SageMaker's service facts and checks"),
    ("fmlab.cli", "`fmlab --help` and every command that needs no training"),
    ("fmlab.jobs", "the jobs layer: builds and sends SageMaker requests"),
    ("fmlab.course_jobs", "the course's jobs (imports fmlab.train.config)"),
    ("fmlab.jobs.sharded", "module 7's job: its TrainConfig and SMP's settings (fmlab.service.smp_settings)"),
    ("fmlab.service.smp_settings", "SMP's --mp_parameters, read by the jobs and by TrainConfig"),
    ("fmlab.train.config", "TrainConfig, which the jobs layer builds"),
    ("fmlab.train.log", "METRIC_DEFINITIONS, which the jobs layer sends"),
    ("fmlab.data", "`fmlab data prepare` and its workers; the jobs layer's course_dataset_uri"),
    ("fmlab.hangs.analysis", "`fmlab hangs`: reads collective traces"),
    ("fmlab.hyperpod.stack", "module 11's FP8 rows and the reference stacks' names"),
    ("fmlab.hyperpod.tiered", "module 11's tiered-checkpointing change: reads the engine's source, not the engine"),
]


def torch_side_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0].removesuffix(".py") in TORCH_SIDE)


def imported_module(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    """The module(s) an import statement loads, relative imports resolved."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not node.level:
        return [node.module or ""]
    package = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)[: -node.level]
    return [".".join(package + ([node.module] if node.module else []))]


def function_imports(path: Path):
    """(line, statement, modules) of every import inside a function or method of `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    seen = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in seen:
                    seen.add(id(node))
                    yield node.lineno, ast.unparse(node), imported_module(node, path)


def allowed_by(rel: str, module: str) -> int | None:
    """The index of the first ALLOWED entry that covers importing `module` in file `rel`, else None."""
    for i, (pattern, allowed, _) in enumerate(ALLOWED):
        if fnmatch.fnmatch(rel, pattern) and (module == allowed or module.startswith(allowed + ".")):
            return i
    return None


def test_torch_side_files_import_at_the_top():
    offending = []
    for path in torch_side_files():
        rel = path.relative_to(PACKAGE).as_posix()
        for line, statement, modules in function_imports(path):
            if any(allowed_by(rel, m) is None for m in modules):
                offending.append(f"src/fmlab/{rel}:{line} {statement}")
    assert not offending, (
        f"{len(offending)} imports inside functions of the torch-side packages (tests/test_import_rule.py says "
        "why): move each to the top of its file, or add the module to ALLOWED with its reason:\n  "
        + "\n  ".join(offending))


def test_every_allowed_entry_is_used_and_says_why():
    used = set()
    for path in torch_side_files():
        rel = path.relative_to(PACKAGE).as_posix()
        for _, _, modules in function_imports(path):
            used.update(allowed_by(rel, m) for m in modules)
    unused = [f"{pattern} {module}" for i, (pattern, module, _) in enumerate(ALLOWED) if i not in used]
    assert not unused, f"ALLOWED entries that no import needs any more (remove them): {unused}"
    assert all(len(reason) > 20 for _, _, reason in ALLOWED)


def torch_chain(module: str, env: dict) -> str:
    """Who pulls torch in when `module` is imported: the nesting of `python -X importtime`, outermost first."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=300)
    rows = []  # (depth, name), children before their parent, as importtime prints them
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "imported package" not in line:
            name = line.rsplit("|", 1)[1]
            rows.append(((len(name) - len(name.lstrip())) // 2, name.strip()))
    start = next((i for i, (_, name) in enumerate(rows) if name == "torch"), None)
    if start is None:
        return "(importtime shows no torch)"
    chain, depth = ["torch"], rows[start][0]
    for d, name in rows[start + 1:]:
        if d < depth:
            chain.append(name)
            depth = d
    return " <- ".join(chain)


@pytest.mark.parametrize("module,why", TORCH_FREE, ids=[m for m, _ in TORCH_FREE])
def test_the_floor_imports_without_torch(module, why):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    code = (f"import sys, {module}\n"
            f"assert {module}.__file__.startswith({str(PACKAGE)!r}), {module}.__file__\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", (f"importing {module} ({why}) loads torch: {torch_chain(module, env)}")
