"""Build the slide decks: slides/NN_topic.md (reveal.js Markdown) -> build/slides/NN_topic.html, offline.

    python -m fmlab slides                  # or: make slides, fmlab slides; then open build/slides/index.html
    python -m fmlab slides --source slides --output build/slides

Deck syntax, as in reveal.js's Markdown plugin: a line `---` starts the next slide, a line `--` a vertical
sub-slide below the current one, and a line starting `Note:` begins that slide's speaker notes (press `s` in
the deck). Math goes between `$...$` (inline) or `$$...$$` (display) and is typeset by KaTeX. The first
`# heading` is the deck's title.

The Markdown becomes HTML here (markdown-it-py); the browser only runs reveal.js and KaTeX, vendored from
their npm packages at build time (see fmlab.course.vendor), so a deck opens from file:// with no network.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.course.vendor import KATEX, REVEAL, VendorError, vendor_all
from fmlab.environment import ROOT

DECK_GLOB = "[0-9][0-9]_*.md"
COURSE_TITLE = "Pretraining Foundation Models on AWS"

_FENCE = re.compile(r"^\s*(```|~~~)")
_NOTE = re.compile(r"^\s*notes?:\s?", re.IGNORECASE)
_CODE_OR_MATH = re.compile(
    r"(?P<fence>^[ \t]*(?P<f>```|~~~).*?^[ \t]*(?P=f)[^\n]*$)"  # fenced code: left alone
    r"|(?P<code>(?P<ticks>`+).+?(?P=ticks))"  # inline code: left alone
    r"|(?P<display>\$\$.+?\$\$)"  # display math
    r"|(?P<inline>\$(?=[^\s$])[^$\n]*?(?<=[^\s$])\$(?!\d))",  # inline math, pandoc's rule: `$5 and $10` is not math
    re.MULTILINE | re.DOTALL,
)


class DeckError(ValueError):
    """A deck that cannot be built; the message says which file and what to change."""


@dataclass
class Slide:
    markdown: str
    notes: str = ""


@dataclass
class Deck:
    """A parsed deck: horizontal slides, each a stack of one or more vertical slides."""

    source: Path
    title: str
    stacks: list[list[Slide]] = field(default_factory=list)

    @property
    def slide_count(self) -> int:
        return sum(len(stack) for stack in self.stacks)

    @property
    def html_name(self) -> str:
        return self.source.with_suffix(".html").name


def _split_lines(text: str) -> list[list[list[str]]]:
    """Lines grouped into stacks of slides, splitting on `---` / `--` lines outside fenced code."""
    stacks: list[list[list[str]]] = [[[]]]
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        if not in_fence and line.rstrip() == "---":
            stacks.append([[]])
        elif not in_fence and line.rstrip() == "--":
            stacks[-1].append([])
        else:
            stacks[-1][-1].append(line)
    return stacks


def _slide(lines: list[str]) -> Slide:
    for i, line in enumerate(lines):
        if _NOTE.match(line):
            notes = [_NOTE.sub("", line, count=1)] + lines[i + 1:]
            return Slide("\n".join(lines[:i]).strip(), "\n".join(notes).strip())
    return Slide("\n".join(lines).strip())


def parse_deck(text: str, source: Path | str = "deck.md") -> Deck:
    """Parse reveal.js Markdown into a Deck; raises DeckError for an empty deck or an empty slide."""
    source = Path(source)
    stacks = [[_slide(lines) for lines in stack] for stack in _split_lines(text)]
    if not any(slide.markdown for stack in stacks for slide in stack):
        raise DeckError(f"{source}: the deck has no slides; write Markdown separated by lines `---`")
    for h, stack in enumerate(stacks, start=1):
        for v, slide in enumerate(stack, start=1):
            if not slide.markdown:
                where = f"slide {h}" + (f".{v}" if len(stack) > 1 else "")
                raise DeckError(f"{source}: {where} is empty; remove the extra `---` or `--` line, or give it content")
    title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), source.stem)
    return Deck(source, title, stacks)


def read_deck(path: Path) -> Deck:
    return parse_deck(path.read_text(encoding="utf-8"), path)


def _markdown():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def render_markdown(text: str) -> str:
    """Markdown to HTML, with math kept verbatim for KaTeX as \\( \\) and \\[ \\] spans."""
    maths: list[str] = []

    def protect(match: re.Match) -> str:
        if match.group("fence") or match.group("code"):
            return match.group(0)
        if match.group("display"):
            body = match.group("display")[2:-2]
            maths.append(f'<span class="math display">\\[{html.escape(body)}\\]</span>')
        else:
            body = match.group("inline")[1:-1]
            maths.append(f'<span class="math inline">\\({html.escape(body)}\\)</span>')
        return f"FMLABMATH{len(maths) - 1}X"

    rendered = _markdown().render(_CODE_OR_MATH.sub(protect, text))
    return re.sub(r"FMLABMATH(\d+)X", lambda m: maths[int(m.group(1))], rendered)


def _section(slide: Slide) -> str:
    notes = f'\n<aside class="notes">{render_markdown(slide.notes)}</aside>' if slide.notes else ""
    return f"<section>\n{render_markdown(slide.markdown)}{notes}\n</section>"


def deck_html(deck: Deck, assets: str = "assets") -> str:
    """The deck as one reveal.js page that loads reveal.js and KaTeX from `assets` (a relative folder)."""
    sections = []
    for stack in deck.stacks:
        inner = "\n".join(_section(slide) for slide in stack)
        sections.append(inner if len(stack) == 1 else f"<section>\n{inner}\n</section>")
    reveal, katex = f"{assets}/{REVEAL.name}", f"{assets}/{KATEX.name}"
    return _DECK_PAGE.format(
        title=html.escape(deck.title), course=html.escape(COURSE_TITLE), slides="\n".join(sections),
        reveal=reveal, katex=katex, source=html.escape(deck.source.name),
    )


def index_html(decks: list[Deck]) -> str:
    rows = "\n".join(
        f'<li>{html.escape(d.source.name[:2])} · <a href="{html.escape(d.html_name)}">{html.escape(d.title)}</a> '
        f'<span class="meta">{d.slide_count} slides · {html.escape(d.source.name)}</span></li>'
        for d in decks
    )
    return _INDEX_PAGE.format(course=html.escape(COURSE_TITLE), rows=rows)


def find_decks(source: Path) -> list[Path]:
    return sorted(source.glob(DECK_GLOB))


@dataclass
class BuildResult:
    decks: list[Deck]
    pages: list[Path]
    index: Path
    seconds: float


def build_decks(source: Path | str = ROOT / "slides", output: Path | str = ROOT / "build" / "slides",
                cache: Path | None = None) -> BuildResult:
    """Every slides/NN_topic.md to output/NN_topic.html, plus output/index.html and the vendored assets."""
    start = time.perf_counter()
    source, output = Path(source), Path(output)
    paths = find_decks(source)
    if not paths:
        raise DeckError(f"no decks in {source}/: expected files named like 01_topic.md")
    decks = [read_deck(p) for p in paths]  # parse everything before writing anything
    output.mkdir(parents=True, exist_ok=True)
    vendor_all(output / "assets", **({"cache": cache} if cache else {}))
    pages = []
    for deck in decks:
        page = output / deck.html_name
        page.write_text(deck_html(deck), encoding="utf-8")
        pages.append(page)
    index = output / "index.html"
    index.write_text(index_html(decks), encoding="utf-8")
    return BuildResult(decks, pages, index, time.perf_counter() - start)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", default=str(ROOT / "slides"), help="folder of NN_topic.md decks")
    parser.add_argument("--output", default=str(ROOT / "build" / "slides"), help="folder for the HTML decks")


def run(args: argparse.Namespace) -> int:
    try:
        result = build_decks(args.source, args.output)
    except (DeckError, VendorError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for deck, page in zip(result.decks, result.pages, strict=True):
        print(f"{deck.slide_count:3d} slides  {os.path.relpath(page)}  {deck.title}")
    print(f"built {len(result.decks)} deck{'' if len(result.decks) == 1 else 's'} in {result.seconds:.1f} s; open {os.path.relpath(result.index)}")
    return 0


_DECK_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<meta name="generator" content="fmlab.course.slides from {source}">
<title>{title} · {course}</title>
<link rel="stylesheet" href="{reveal}/dist/reset.css">
<link rel="stylesheet" href="{reveal}/dist/reveal.css">
<link rel="stylesheet" href="{reveal}/dist/theme/white.css">
<link rel="stylesheet" href="{reveal}/plugin/highlight/monokai.css">
<link rel="stylesheet" href="{katex}/dist/katex.min.css">
<style>
  .reveal {{ font-size: 30px; }}
  .reveal h1, .reveal h2, .reveal h3 {{ text-transform: none; }}
  .reveal h1 {{ font-size: 1.9em; }}
  .reveal h2 {{ font-size: 1.4em; }}
  .reveal table {{ font-size: 0.72em; }}
  .reveal code {{ font-size: 0.85em; }}
  .reveal ul, .reveal ol {{ display: block; }}
  .fmlab-home {{ position: fixed; left: 1em; bottom: 1em; z-index: 30; font: 14px sans-serif; color: #888; }}
</style>
</head>
<body>
<a class="fmlab-home" href="index.html">all decks</a>
<div class="reveal">
<div class="slides">
{slides}
</div>
</div>
<script src="{reveal}/dist/reveal.js"></script>
<script src="{reveal}/plugin/notes/notes.js"></script>
<script src="{reveal}/plugin/highlight/highlight.js"></script>
<script src="{katex}/dist/katex.min.js"></script>
<script src="{katex}/dist/contrib/auto-render.min.js"></script>
<script>
  renderMathInElement(document.querySelector(".slides"), {{
    delimiters: [{{left: "\\\\[", right: "\\\\]", display: true}}, {{left: "\\\\(", right: "\\\\)", display: false}}],
    throwOnError: false
  }});
  Reveal.initialize({{hash: true, slideNumber: "c/t", plugins: [RevealNotes, RevealHighlight]}});
</script>
</body>
</html>
"""

_INDEX_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Slides · {course}</title>
<style>
  body {{ font-family: system-ui, sans-serif; max-width: 46em; margin: 3em auto; padding: 0 1em; color: #222; }}
  li {{ margin: 0.6em 0; font-size: 1.15em; }}
  .meta {{ color: #777; font-size: 0.8em; margin-left: 0.5em; }}
</style>
</head>
<body>
<h1>{course}: slides</h1>
<p>One deck per module, in course order. Arrow keys move between slides, <kbd>s</kbd> opens the speaker
notes, <kbd>Esc</kbd> the overview. The decks work offline.</p>
<ul class="decks">
{rows}
</ul>
</body>
</html>
"""
