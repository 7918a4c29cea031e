"""The instructor's guide, docs/instructor.md: its generated blocks, and the figures it quotes (issue 56).

    python -m fmlab.course.generate         # rewrites the guide's generated blocks with the other generated parts
    guide.quoted_figures()                  # [(record, value)]: what the guide says a notebook prints
    guide.assert_quoted(records, "nb12")    # in a notebook's test: every figure quoted for it is what it recorded

The guide is written by hand except for blocks between `<!-- guide:NAME:begin -->` and `<!-- guide:NAME:end -->`:
- `paths`: the paths table (fmlab.course.paths.table_markdown) and the method of the minutes;
- `runbook`: each workshop path's agenda with clock times, milestones and cuts (fmlab.course.room);
- `studio`: the room on SageMaker Studio, from the measured peak memory (MEMORY_FILE, benchmarks/course_memory.py);
- `NN` per module: the minutes on each path, the deep dives to skip under time pressure, and the lab's hints (the
  checks' own, read from fmlab.labs.labNN: the mistakes learners make, and what unblocks them).
A figure the guide quotes is written `[nb12 | nb12.checkpoints/keep = 5]`: the notebook, the record's name
(fmlab.course.records) and a path into its value after `/`, and the value as the notebook prints it (a number to
the places shown; `%` multiplies by 100). The notebook's test calls `assert_quoted(records, "nb12")`, so a changed
output is noticed where the notebook runs.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

from fmlab.course.records import lookup
from fmlab.environment import ROOT

GUIDE = ROOT / "docs" / "instructor.md"
MEMORY_FILE = ROOT / "docs" / "measurements" / "course-memory.json"
FIGURE = re.compile(r"\[(nb\d\d\w*) \| ([^=\]]+?) = ([^\]]+)\]")
BLOCK = re.compile(r"(<!-- guide:(\w+):begin -->\n).*?(<!-- guide:\2:end -->)", re.S)
# SageMaker Studio JupyterLab instances a room would pick from: GiB of memory (the EC2 T3 and M5 instance types'
# memory) and USD an hour on demand (STUDIO_SOURCE).
STUDIO_INSTANCES = {"ml.t3.medium": (4, 0.05), "ml.t3.large": (8, 0.10), "ml.t3.xlarge": (16, 0.20),
                    "ml.m5.xlarge": (16, 0.23)}
STUDIO_SOURCE = ("SageMaker Studio notebook on-demand rates as several public price tables in code republish them "
                 "(they agree: ml.t3.medium $0.05, ml.t3.large $0.10, ml.t3.xlarge $0.20, ml.m5.xlarge $0.23 an hour; "
                 "read 2026-11-28); the pricing page renders them with JavaScript and was not read: check it")


def _literal(node: ast.AST) -> str:
    """A hint's text: constants as written, each formatted value as '...'."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "..." for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal(node.left) + _literal(node.right)
    return ""


def lab_hints(number: str, root: Path = ROOT) -> list[str]:
    """The hints a module's lab checks print on a failure: `*_HINT` constants and `hint = ...` assignments,
    LAB.check's fifth argument, and the literal text after "Hint: " in any message."""
    out = []
    for path in sorted((root / "src" / "fmlab" / "labs").glob(f"lab{number}*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and (t.id == "hint" or
                                                                                   t.id.endswith("_HINT"))
                                                    for t in node.targets):
                out.append(_literal(node.value))
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "check" and len(node.args) >= 5:
                out.append(_literal(node.args[4]))
            elif isinstance(node, ast.Constant | ast.JoinedStr):
                text = _literal(node)
                if "Hint: " in text:
                    out.append(text.split("Hint: ", 1)[1])
    cleaned = (h.strip().rstrip(".") for h in out)
    return [h for h in dict.fromkeys(cleaned) if len(h) > 12 and not h.startswith("...")]


def module_block(number: str, data: dict | None = None) -> str:
    from fmlab.course import paths, times

    data = data or times.load()
    lines = []
    for stem, sections in paths.notebook_sections(data).items():
        if not stem.startswith(number + "_"):
            continue
        deep = paths.deep_dives(stem, sections)
        lines.append(f"- **{stem}**: {'; '.join(paths.per_path(stem, sections, ' '))} (a room's minutes on the "
                     "workshop paths, a reader's for the full course).")
        lines.append(f"  Skip under time pressure: {'; '.join(deep) if deep else 'nothing (every section is core)'}.")
    labs = {name: lab for name, lab in data["labs"].items() if name.startswith(f"lab_{number}")}
    for name, lab in labs.items():
        on = [p for p in paths.PATH_NAMES if name in paths.labs(p, data)]
        lines.append(f"- **{name}**: {paths.fmt_minutes(lab['minutes'])} for a reader, "
                     f"{paths.fmt_minutes(paths.lab_minutes(lab))} in a room ({lab['answer_lines'] or lab['exercises']} "
                     f"{'lines to write' if lab['answer_lines'] else 'exercises'}); on {', '.join(on)}.")
    hints = lab_hints(number)
    if hints:
        lines.append("- What learners get wrong, and the checks' own hint for it:")
        lines += [f"  - {h}" for h in hints]
    return "\n".join(lines) + "\n"


SESSION_FILES = {"one day": ROOT / "docs" / "measurements" / "studio-session-one-day.json",
                 "two days": ROOT / "docs" / "measurements" / "studio-session-two-day.json"}
OS_GIB = 1.0  # the instance's own system and Studio's agents: not measured here
T3_CREDITS = ("ml.t3 instances are burstable: a t3.large earns 36 CPU credits an hour, a 30% baseline per vCPU "
              "(EC2's burstable performance credit table)")


def studio_block(memory: dict | None = None, sessions: dict | None = None) -> str:
    """The room on Studio from a learner's session as measured (benchmarks/studio_session.py: JupyterLab, the
    path's notebooks run in order with every kernel left open, its labs): the smallest instance that holds the
    longer path's peak with OS_GIB to spare; and make course's peak, the instructor's warm-up."""
    memory = memory or json.loads(MEMORY_FILE.read_text())
    sessions = sessions or {p: json.loads(f.read_text()) for p, f in SESSION_FILES.items()}
    need = max(s["peak_gib"] for s in sessions.values()) + OS_GIB
    fits = [(name, gib, usd) for name, (gib, usd) in STUDIO_INSTANCES.items() if gib >= need]
    name, gib, usd = min(fits, key=lambda f: f[2])
    first = next(iter(sessions.values()))
    lines = [f"- Measured ({first['date']}, {first['machine']}, benchmarks/studio_session.py), as a learner uses a "
             "space: JupyterLab, the path's notebooks run in order and every kernel left open, then its labs."]
    for path, s in sessions.items():
        cpu = sum(row["seconds"] for row in s["notebooks"])
        lines.append(f"  - {path}: **{s['peak_gib']:.2f} GiB** at peak (during {s['peak_during']}), "
                     f"{s['at_rest_gib']:.2f} GiB at rest with {s['kernels_open']} kernels open (each "
                     f"{s['kernel_at_rest_gib']['smallest']:.2f}-{s['kernel_at_rest_gib']['largest']:.2f} GiB; "
                     f"JupyterLab alone {s['jupyterlab_alone_gib']:.2f}); its cells ran {cpu / 60:.1f} minutes in all.")
    lines += [
        f"- Recommended: **{name}** ({gib} GiB, ${usd:.2f} an hour: about ${8 * usd:.2f} per learner-day of 8 hours) "
        f"holds the longer path's peak with {gib - need + OS_GIB:.1f} GiB to spare, {OS_GIB:g} GiB of it for the "
        "system. " + ", ".join(f"{n} ({g} GiB) {'holds it too' if g >= need else 'does not'}"
                               for n, (g, _) in STUDIO_INSTANCES.items() if n != name)
        + f". Kernel culling is not needed on it; on a smaller instance, shut each notebook's kernel down when "
          f"leaving it. {T3_CREDITS}: the path's cells run a few minutes a day, well inside that. Prices: "
          f"{STUDIO_SOURCE}.",
        f"- The instructor's warm-up, `make course`, runs two notebooks at a time and peaks at "
        f"**{memory['peak_together_gib']:.2f} GiB** (benchmarks/course_memory.py, {memory['date']}): run it on the "
        "same instance, with the learners' kernels shut.",
    ]
    return "\n".join(lines) + "\n"


def render(text: str, data: dict | None = None) -> str:
    """The guide with every generated block rewritten."""
    from fmlab.course import paths, room, times

    def block(match: re.Match) -> str:
        name = match.group(2)
        if name == "paths":
            body = (paths.table_markdown(data) + f"\nA reader's minutes (the full course): {times.METHOD}. The "
                    f"workshop paths count a room's: {room.METHOD}.\n")
        elif name == "runbook":
            body = room.runbook_markdown(data)
        elif name == "studio":
            body = studio_block()
        elif re.fullmatch(r"\d\d", name):
            body = module_block(name, data)
        else:
            raise ValueError(f"docs/instructor.md: unknown generated block {name!r}")
        return match.group(1) + body + match.group(3)

    return BLOCK.sub(block, text)


def quoted_figures(text: str | None = None) -> list[tuple[str, str, str]]:
    """Every `[notebook | record/path = value]` the guide quotes."""
    text = GUIDE.read_text() if text is None else text
    return [(m.group(1), m.group(2).strip(), m.group(3).strip()) for m in FIGURE.finditer(text)]


def _same(value, quoted: str) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value) == quoted
    try:
        number = float(quoted.replace(",", "").rstrip("%"))
    except ValueError:
        return False
    places = len(quoted.rstrip("%").split(".")[1]) if "." in quoted else 0
    shown = 100 * value if quoted.endswith("%") else value
    return math.isclose(round(shown, places), number, abs_tol=10 ** -places / 2)


# The guide's tag for each notebook (its records' prefix, where it has one)
NOTEBOOK_OF = {"nb00": "00_setup", "nb01": "01_when_to_pretrain", "nb02": "02_data_at_scale",
               "nb03": "03_parallel_jobs_and_warm_pools", "nb04": "04_data_parallel", "nb05": "05_sharded_data_parallel",
               "nb06": "06_tensor_parallel", "nb07": "07_gpt30b_sharded_training",
               "nb08": "08_checkpointing_and_recovery", "nb08r": "08_retries_and_hangs",
               "nb09": "09_trainium_continuous_pretraining", "nb10": "10_evaluate_export_and_serve",
               "nb11": "11_pretraining_on_aws_in_2026", "nb12": "12_capstone"}


def assert_quoted(records: dict, notebook: str, text: str | None = None) -> int:
    """Every figure the guide quotes for `notebook` (e.g. "nb12") is what the notebook recorded, and its two-minute
    check (fmlab.course.checks) finds every answer in the records; how many figures were checked."""
    from fmlab.course import checks

    wrong, checked = [], 0
    if text is None and notebook in NOTEBOOK_OF:
        wrong += [f"two-minute check: {q} {a}" for q, a in checks.answers(NOTEBOOK_OF[notebook], records)
                  if a.startswith("not computed")]
        wrong += [f"two-minute check: {w}" for w in checks.unsupported(NOTEBOOK_OF[notebook], records)]
    for tag, path, quoted in quoted_figures(text):
        if tag != notebook:
            continue
        checked += 1
        try:
            value = lookup(records, path)
        except (KeyError, IndexError, TypeError) as e:
            wrong.append(f"{path}: {e}")
            continue
        if not _same(value, quoted):
            wrong.append(f"{path}: the guide says {quoted}, the notebook recorded {value!r}")
    assert not wrong, "docs/instructor.md quotes figures the notebook no longer prints: " + "; ".join(wrong)
    return checked


def off_path_figures(quoted: list[tuple[str, str, str]] | None = None, root: Path = ROOT) -> list[tuple[str, str, str]]:
    """(tag, record path, section) for each figure the guide quotes from a section that the narrowest path taking
    its notebook skips: a room on that path will not see it printed, so the guide says "deep dive" before it."""
    quoted = quoted_figures() if quoted is None else quoted
    from fmlab.course import pathrun

    out = []
    for tag, record_path, _ in quoted:
        stem = NOTEBOOK_OF[tag]
        path = pathrun.narrowest_path(stem)
        if path is None:
            continue
        where = pathrun.record_sections(json.loads((root / "notebooks" / f"{stem}.ipynb").read_text()))
        section = where.get(record_path.split("/")[0])
        if section is not None and section not in pathrun.taken_keys(path, stem):
            out.append((tag, record_path, section))
    return out
