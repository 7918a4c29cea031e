"""Execute the course headless: every notebook, then every lab solution, with papermill.

    python -m fmlab course             # or: make course
    python -m fmlab course --only 01   # just the notebooks whose name contains "01"
    python -m fmlab course --jobs 1    # one at a time (the default runs two, each in its own kernel)

Run N at a time, each kernel gets 1/N of the cores as torch threads (fmlab.environment.share_cores), unless
OMP_NUM_THREADS is set. Each kernel starts as Jupyter starts it, so a notebook runs here as in a learner's Jupyter.

Each executed notebook lands in build/executed/ with its outputs; the table gives status and seconds. What the
kernels and libraries write to stderr (ipykernel's "running over TCP without encryption" warning, library warnings)
goes to build/course.log, whose path is printed once, so the output is the progress and the table.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.course.labgen import LAB_GLOB
from fmlab.environment import ROOT, share_cores


@dataclass
class NotebookResult:
    source: Path
    output: Path
    seconds: float
    ok: bool
    error: str = ""
    records: dict = field(default_factory=dict)


def course_notebooks(root: Path = ROOT, labs: bool = True) -> list[Path]:
    """The course in order: notebooks/NN_*.ipynb, then labs/solutions/lab_NN_*.ipynb."""
    found = sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if labs:
        found += sorted((root / "labs" / "solutions").glob(LAB_GLOB))
    return found


def execute(notebook: Path, output: Path, parameters: dict | None = None, timeout: int = 600,
            cwd: Path | None = None) -> NotebookResult:
    """Run one notebook with papermill, in its own folder unless `cwd` names another; never raises for a failing
    notebook."""
    import papermill as pm

    from fmlab.course.records import read_records

    output.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    error = ""
    try:
        pm.execute_notebook(str(notebook), str(output), parameters=parameters or {}, kernel_name="python3",
                            cwd=str(cwd or notebook.parent), progress_bar=False, execution_timeout=timeout)
    except Exception as e:  # papermill raises PapermillExecutionError with the failing cell
        error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
    seconds = time.perf_counter() - start
    records = read_records(output) if output.exists() else {}
    return NotebookResult(notebook, output, seconds, not error, error, records)


BARE_FIGURE = "<Figure size"  # what IPython prints for a matplotlib Figure it cannot draw (no pyplot, no PNG)


def bare_figures(executed: str | Path) -> list[str]:
    """The outputs of an executed notebook that show a figure only as text: "cell N: <Figure size ...>".

    An output counts when its text (a stream or text/plain) holds `<Figure size` and it carries no image beside
    it; an empty list means every figure was drawn. Notebook tests assert it is empty."""
    import nbformat

    found = []
    for i, cell in enumerate(nbformat.read(str(executed), as_version=4).cells):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = out.get("text", "") if out.get("output_type") == "stream" else data.get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            if BARE_FIGURE in text and not any(k.startswith("image/") for k in data):
                found.append(f"cell {i}: {text.strip().splitlines()[0][:80]}")
    return found


def course_log(output: str | Path) -> Path:
    """The log of a course run whose executed notebooks go to `output`: course.log beside that folder."""
    return Path(output).parent / "course.log"


@contextmanager
def stderr_to(log: Path) -> Iterator[Path]:
    """Send file descriptor 2 to `log` (appending): this process's stderr and that of every kernel it starts."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(log, "ab") as sink:
            os.dup2(sink.fileno(), 2)
            yield log
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def run_course(output: str | Path = "build/executed", only: list[str] | None = None, labs: bool = True,
               root: Path = ROOT, log: str | Path | None = None, jobs: int = 1) -> list[NotebookResult]:
    """Execute the course's notebooks, `jobs` at a time (each in its own process), printing one line as each ends;
    the results come back in course order. stderr goes to `log` (default: course.log next to the output folder)."""
    chosen = [nb for nb in course_notebooks(root, labs) if not only or any(o in nb.name for o in only)]
    return run_many(chosen, output, jobs=jobs, root=root, log=log)


def run_many(chosen: list[Path], output: str | Path, jobs: int = 1, root: Path = ROOT, log: str | Path | None = None,
             cwd_of=None) -> list[NotebookResult]:
    """Execute `chosen` (notebooks under `root`) into `output`/notebooks and `output`/labs, `jobs` at a time;
    `cwd_of(nb)` names a notebook's working folder (None: its own)."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    out = Path(output)
    cwd_of = cwd_of or (lambda nb: None)
    log = Path(log) if log else course_log(out)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    print(f"kernel messages and warnings: {log}", flush=True)

    def target(nb: Path) -> Path:
        return out / ("labs" if nb.parent.name == "solutions" else "notebooks") / nb.name

    def report(i: int, result: NotebookResult) -> None:
        print(f"[{i}/{len(chosen)}] {result.source.relative_to(root)} ... {'ok' if result.ok else 'FAILED'} "
              f"{result.seconds:.1f} s", flush=True)

    results: dict[Path, NotebookResult] = {}
    with stderr_to(log):
        if jobs == 1:
            for i, nb in enumerate(chosen, 1):
                print(f"[{i}/{len(chosen)}] {nb.relative_to(root)} ...", end=" ", flush=True)
                results[nb] = execute(nb, target(nb), cwd=cwd_of(nb))
                print(f"{'ok' if results[nb].ok else 'FAILED'} {results[nb].seconds:.1f} s", flush=True)
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            # the longest first (labs and notebooks 07-10 run the most processes), so none ends the run alone
            order = sorted(chosen, key=lambda nb: -_expected_seconds(nb))
            # each kernel an equal share of the cores (OMP_NUM_THREADS, set in the pool's processes, which the
            # kernels inherit), so two kernels' torch threads do not fight over them
            with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=share_cores,
                                     initargs=(jobs,)) as pool:
                futures = [pool.submit(execute, nb, target(nb), None, 600, cwd_of(nb)) for nb in order]
                for future in as_completed(futures):
                    result = future.result()
                    results[result.source] = result
                    report(len(results), result)
    return [results[nb] for nb in chosen]


# Seconds each took on the 2-core reference machine in make course (two at a time; a clean clone of 2026-11-29):
# only the order of a parallel run depends on them, the longest first. A notebook not listed counts as 20 s.
EXPECTED_SECONDS = {"08_checkpointing": 64, "10_": 57, "07_": 55, "08_retries": 51, "lab_08b": 46, "11_": 43,
                    "lab_07_": 42, "04_": 40, "lab_11": 33, "03_": 32, "06_": 28, "01_": 25, "lab_03": 24, "05_": 23,
                    "09_": 17, "02_": 14, "00_": 14, "lab_10": 14, "lab_07b": 12, "lab_09": 10, "lab_01": 10,
                    "lab_12": 8, "lab_08_": 8, "lab_06": 8, "lab_02": 8, "12_": 7, "lab_04": 6, "lab_05": 6}


def _expected_seconds(nb: Path) -> float:
    return next((s for key, s in EXPECTED_SECONDS.items() if nb.name.startswith(key)), 20)


def print_table(results: list[NotebookResult]) -> None:
    width = max([len(r.source.name) for r in results] + [8])
    print(f"\n{'notebook':<{width}}  status  seconds")
    for r in results:
        print(f"{r.source.name:<{width}}  {'ok' if r.ok else 'FAILED':<6}  {r.seconds:7.1f}")
        if not r.ok:
            print(f"{'':<{width}}  {r.error}")
    total = sum(r.seconds for r in results)
    print(f"{'total':<{width}}  {sum(r.ok for r in results)}/{len(results)} ok  {total:7.1f}  (the notebooks' seconds, added)")
