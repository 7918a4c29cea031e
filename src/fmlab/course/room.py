"""The minutes a room needs, not a reader: decks, discussion, labs at a learner's pace, and a day with its breaks.

    room.minutes("one day")        # content a room needs for the path, without breaks
    room.agenda("one day")         # [Block]: clock times from 9:00, breaks placed, a milestone per block
    room.cuts("one day")           # what to drop first when the room runs late, with the minutes each saves

`fmlab.course.times` estimates a reader alone: words, a minute per code cell, the cells' run times, a minute per
line of a lab's answer. A room adds (each factor with its source, read 2026-11-29):
- the deck: SLIDE_MINUTES a slide (M. Faloutsos, "How to give a good talk", UC Riverside: "Expect 1.5-2 minutes per
  slide on average"; Kawasaki's 10/20/30 rule, ten slides in twenty minutes). A path presents the share of a deck
  that its sections are of the notebook (the decks follow their notebooks' order), at least OPENING_SLIDES;
- discussion: DISCUSSION_SHARE of the notebook's minutes (the Carpentries' workshop template,
  carpentries/workshop-template _includes/swc/schedule.html at 01c3371d: 30 minutes of wrap-up per 300 taught);
- labs at a learner's pace: LAB_FACTOR times the answer's writing (a SageMaker Studio hands-on lab by AWS Korea,
  daekeun-ml/sagemaker-studio-workshop-kr's README: "about 3-3.5 hours", "1.5-2 hours" for the experienced; the
  low end of that 1.75-2x);
- the day: 9:00 to 17:00 with a lunch hour and two short breaks (the Carpentries: "starting at 8:30 or 9:00 ... and
  running to 4:30 or 5:00 each day with breaks for coffee and lunch", info.carpentries.org/article/48; the lesson
  episodes' breaks of 15 and 45-60 minutes, swcarpentry/python-novice-gapminder at 58eec486).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fmlab.course import paths, times
from fmlab.course.paths import DISCUSSION_SHARE, LAB_FACTOR, SLIDE_MINUTES, lab_minutes
from fmlab.environment import ROOT

DAY_START, DAY_END = 9 * 60, 17 * 60  # minutes after midnight
BREAKS = ((10 * 60 + 30, 15, "coffee"), (12 * 60 + 15, 60, "lunch"), (15 * 60, 15, "coffee"))  # (at or after, min)
CONTENT_PER_DAY = DAY_END - DAY_START - sum(b[1] for b in BREAKS)  # 390 minutes: 6.5 hours
DAYS = {"one day": 1, "two days": 2}
METHOD = (f"a reader's minutes (`fmlab.course.times`) plus {DISCUSSION_SHARE:.0%} for discussion, the deck's share at "
          f"{SLIDE_MINUTES:g} min a slide, and labs written at {LAB_FACTOR:g}x the reader's minutes a line; a day is "
          f"9:00-17:00 with {sum(b[1] for b in BREAKS)} min of breaks, so {CONTENT_PER_DAY / 60:.1f} h of content "
          "(sources: `fmlab.course.room`)")


@dataclass
class Block:
    name: str  # a notebook's stem, a lab's, or a break's
    minutes: float
    kind: str  # "notebook", "lab" or "break"
    start: int = 0  # minutes after midnight of its day
    day: int = 1
    milestone: str = ""

    @property
    def clock(self) -> str:
        end = self.start + round(self.minutes)
        return f"{self.start // 60}:{self.start % 60:02d}-{end // 60}:{end % 60:02d}"


def blocks(path: str, data: dict | None = None) -> list[Block]:
    """The path's content in course order: each notebook (its sections, discussion and deck share), a module's lab
    after its last notebook."""
    data = data or times.load()
    rows = paths.rows(path, data)
    out = []
    for i, row in enumerate(rows):
        minutes = paths.room_minutes(path, row.module, paths.notebook_sections(data)[row.module], data)
        out.append(Block(row.module, minutes, "notebook", milestone=milestone(row.module)))
        if i + 1 == len(rows) or rows[i + 1].module[:2] != row.module[:2]:
            out += [Block(name, lab_minutes(data["labs"][name]), "lab", milestone="every check passes")
                    for name in paths.LABS[path] if name.startswith(f"lab_{row.module[:2]}_")]
    return out


def milestone(stem: str) -> str:
    """What the room can answer when the block is done: its two-minute check's first question."""
    from fmlab.course import checks

    return f"the room answers: {checks.answers(stem, {})[0][0]}"


def minutes(path: str, data: dict | None = None) -> float:
    """Content minutes a room needs for `path` (no breaks)."""
    return sum(b.minutes for b in blocks(path, data))


def days(path: str, data: dict | None = None) -> list[list[Block]]:
    """The path's blocks split into its days where the longest day is shortest (a block is not split)."""
    items = blocks(path, data)
    count = DAYS.get(path, 1)
    if count == 1:
        return [items]
    sums = [sum(b.minutes for b in items[:k]) for k in range(len(items) + 1)]
    k = min(range(1, len(items)), key=lambda k: max(sums[k], sums[-1] - sums[k]))
    return [items[:k], items[k:]]


def agenda(path: str, data: dict | None = None) -> list[Block]:
    """The path's blocks with clock times from DAY_START on each day; each break is taken at the block boundary
    nearest its time."""
    out = []
    for day, items in enumerate(days(path, data), 1):
        clock, pending = DAY_START, list(BREAKS)
        for block in items:
            while pending and clock + block.minutes / 2 >= pending[0][0]:
                _, length, name = pending.pop(0)
                out.append(Block(name, length, "break", clock, day))
                clock += length
            block.start, block.day = round(clock), day
            out.append(block)
            clock += round(block.minutes)
    return out


def problems(data: dict | None = None) -> list[str]:
    """A workshop day whose content exceeds CONTENT_PER_DAY: it would end after 17:00."""
    out = []
    for path in DAYS:
        for day, items in enumerate(days(path, data), 1):
            content = sum(b.minutes for b in items)
            if content > CONTENT_PER_DAY:
                out.append(f"the {path} path's day {day} holds {content:.0f} min of content, more than a day's "
                           f"{CONTENT_PER_DAY} (9:00-17:00 less breaks): cut a section or a lab")
    return out


def ends(path: str, data: dict | None = None) -> str:
    """The clock time the path's last block ends (on its last day)."""
    last = agenda(path, data)[-1]
    return last.clock.split("-")[1]


# What to drop first when a room runs late, in order: (notebook, section); none may take a section a later one needs or
# one its two-minute check reads (cut_problems). The spine's own demonstrations go last.
CUTS = {
    "one day": (("04_data_parallel", "1"), ("12_capstone", "3"), ("05_sharded_data_parallel", "6"),
                ("04_data_parallel", "6")),
    "two days": (("10_evaluate_export_and_serve", "4"), ("06_tensor_parallel", "5"), ("01_when_to_pretrain", "7"),
                 ("05_sharded_data_parallel", "2"), ("12_capstone", "6"), ("02_data_at_scale", "5")),
}


def cuts(path: str, data: dict | None = None) -> list[tuple[str, str, float]]:
    """(notebook, section title, minutes a room saves) for each of CUTS[path]: the section's minutes with their
    discussion."""
    data = data or times.load()
    out = []
    for stem, key in CUTS[path]:
        section = next(s for s in paths.notebook_sections(data)[stem] if paths.key(s["title"]) == key)
        out.append((stem, section["title"], section["minutes"] * (1 + DISCUSSION_SHARE)))
    return out


def cut_problems(data: dict | None = None) -> list[str]:
    """A cut that names a section its path does not take, one a later section needs (alone or with the other cuts),
    or one whose record the notebook's two-minute check reads."""
    from fmlab.course import checks, pathrun

    out = []
    for path, chosen in CUTS.items():
        for stem, key in chosen:
            if key not in paths.taken(path, stem, paths.notebook_sections(data)[stem]):
                out.append(f"CUTS[{path!r}] drops {stem} §{key}, which the path does not take")
                continue
            needed = pathrun.path_problems(path, without={(stem, key)})
            out += [f"CUTS[{path!r}]: without {stem} §{key}, {p}" for p in needed]
            written = pathrun.record_sections(json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text()))
            out += [f"CUTS[{path!r}]: without {stem} §{key}, its two-minute check cannot answer from `{name}`"
                    for name in sorted(checks.records_read(stem)) if written.get(name) == key]
        together = pathrun.path_problems(path, without=set(chosen))  # a room late all day drops them all
        out += [f"CUTS[{path!r}] all together: {p}" for p in together]
    return out


def runbook_markdown(data: dict | None = None) -> str:
    """The agenda of each workshop path with clock times and milestones, then its cuts."""
    data = data or times.load()
    lines = []
    for path in DAYS:
        lines += [f"**{path.capitalize()}** ({minutes(path, data) / 60:.1f} h of content, ends {ends(path, data)}"
                  f"{' on day 2' if DAYS[path] > 1 else ''}):", "",
                  "| day | time | block | on track when |", "|---|---|---|---|"]
        for b in agenda(path, data):
            what = {"notebook": f"notebook {b.name}", "lab": f"lab {b.name}", "break": f"*{b.name} break*"}[b.kind]
            lines.append(f"| {b.day} | {b.clock} | {what} | {b.milestone or ''} |")
        saved = cuts(path, data)
        lines += ["", "Running late: drop, in this order, " + "; ".join(
            f"{stem[:2]} *{title}* ({m:.0f} min)" for stem, title, m in saved)
            + f". Together they give back {sum(m for _, _, m in saved):.0f} minutes; every later section still runs "
              "without them.", ""]
    lines.append(f"Minutes: {METHOD}.")
    return "\n".join(lines) + "\n"
