"""Build the slide decks: slides/NN_topic.md (reveal.js Markdown) -> build/slides/NN_topic.html, offline.

    python -m fmlab slides                  # or: make slides, fmlab slides; then open build/slides/index.html
    python -m fmlab slides --source slides --output build/slides

Deck syntax, as in reveal.js's Markdown plugin: a line `---` starts the next slide, a line `--` a vertical
sub-slide below the current one, and a line starting `Note:` begins that slide's speaker notes (press `s` in
the deck). Math goes between `$...$` (inline) or `$$...$$` (display) and is typeset by KaTeX. The first
`# heading` is the deck's title.

Figures drawn by the package: `![caption](figure:NAME)` on a line of its own draws the figure registered as NAME
in fmlab.course.figures.FIGURES (a function returning a matplotlib Figure) to `figures/NAME.svg` beside the
built deck and shows it with the caption below. An unknown NAME fails the build before anything is written,
and the error lists the known figures.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.course.figures import known as known_figures
from fmlab.course.figures import render_svg
from fmlab.course.vendor import KATEX, REVEAL, VendorError, vendor_all
from fmlab.environment import ROOT

DECK_GLOB = "[0-9][0-9]_*.md"
COURSE_TITLE = "Pretraining Foundation Models on AWS"
FIGURE_PREFIX = "figure:"  # ![caption](figure:NAME)
FIGURES_FOLDER = "figures"  # beside the built decks: figures/NAME.svg

_FENCE = re.compile(r"^\s*(```|~~~)")
_NOTE = re.compile(r"^\s*notes?:\s?", re.IGNORECASE)
_CODE_OR_MATH = re.compile(
    r"(?P<fence>^[ \t]*(?P<f>```|~~~).*?^[ \t]*(?P=f)[^\n]*$)"  # fenced code: left alone
    r"|(?P<code>(?P<ticks>`+).+?(?P=ticks))"  # inline code: left alone
    r"|(?P<display>\$\$.+?\$\$)"  # display math
    r"|(?P<inline>\$(?=[^\s$])[^$\n]*?(?<=[^\s$])\$(?!\d))",  # inline math, pandoc's rule: `$5 and $10` is not math
    re.MULTILINE | re.DOTALL,
)
_MATH_MARK = re.compile(r"FMLABMATH(\d+)X")


class DeckError(ValueError):
    """A deck that cannot be built; the message says which file and what to change."""


@dataclass
class Slide:
    markdown: str
    notes: str = ""
    figures: list[str] = field(default_factory=list)  # the NAMEs of its ![caption](figure:NAME) images


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

    @property
    def figures(self) -> list[str]:
        """The figures the deck shows, each named once, in order of appearance."""
        return list(dict.fromkeys(name for stack in self.stacks for slide in stack for name in slide.figures))


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
            slide = Slide("\n".join(lines[:i]).strip(), "\n".join(notes).strip())
            break
    else:
        slide = Slide("\n".join(lines).strip())
    slide.figures = figure_references(slide.markdown) + figure_references(slide.notes)
    return slide


def figure_references(text: str) -> list[str]:
    """The NAMEs of the `![caption](figure:NAME)` images in Markdown, in order; code and math are ignored."""
    names = []
    for token in _markdown().parse(_protect_math(text)[0]):
        for child in token.children or ():
            src = child.attrGet("src") if child.type == "image" else None
            if isinstance(src, str) and src.startswith(FIGURE_PREFIX):
                names.append(src[len(FIGURE_PREFIX):])
    return names


def _unknown_figure(name: str, known) -> str:
    return (f"unknown figure {name!r}: known figures are {', '.join(sorted(known)) or '(none)'}; "
            f"write ![caption](figure:NAME) with one of them, or register NAME in fmlab.course.figures.FIGURES")


def parse_deck(text: str, source: Path | str = "deck.md", figures=None) -> Deck:
    """Parse reveal.js Markdown into a Deck; raises DeckError for an empty deck, an empty slide, or a figure
    that is not among `figures` (default: the names registered in fmlab.course.figures.FIGURES)."""
    source = Path(source)
    known = set(known_figures() if figures is None else figures)
    stacks = [[_slide(lines) for lines in stack] for stack in _split_lines(text)]
    if not any(slide.markdown for stack in stacks for slide in stack):
        raise DeckError(f"{source}: the deck has no slides; write Markdown separated by lines `---`")
    for h, stack in enumerate(stacks, start=1):
        for v, slide in enumerate(stack, start=1):
            where = f"slide {h}" + (f".{v}" if len(stack) > 1 else "")
            if not slide.markdown:
                raise DeckError(f"{source}: {where} is empty; remove the extra `---` or `--` line, or give it content")
            for name in slide.figures:
                if name not in known:
                    raise DeckError(f"{source}: {where}: {_unknown_figure(name, known)}")
    title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), source.stem)
    return Deck(source, title, stacks)


def read_deck(path: Path) -> Deck:
    return parse_deck(path.read_text(encoding="utf-8"), path)


def _markdown():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.core.ruler.push("fmlab_figures", _figure_paragraphs)
    md.add_render_rule("image", _render_image)
    return md


def _is_figure(token) -> bool:
    src = token.attrGet("src") if token.type == "image" else None
    return isinstance(src, str) and src.startswith(FIGURE_PREFIX)


def _figure_paragraphs(state) -> None:
    """A paragraph that holds one figure image and nothing else becomes <figure>, its caption a <figcaption>."""
    tokens = state.tokens
    for i in range(1, len(tokens) - 1):
        opening, inline = tokens[i - 1], tokens[i]
        if inline.type != "inline" or opening.type != "paragraph_open" or opening.hidden:
            continue
        kids = [c for c in inline.children or () if c.type != "softbreak" and not (c.type == "text" and not c.content.strip())]
        if len(kids) == 1 and _is_figure(kids[0]):
            opening.tag = tokens[i + 1].tag = "figure"
            opening.attrSet("class", "fmlab-figure")
            kids[0].meta["fmlab_caption"] = True


def _render_image(self, tokens, idx, options, env) -> str:
    """markdown-it's image, except `figure:NAME`: the figure's SVG (env["figures"]: NAME -> its path)."""
    token = tokens[idx]
    if not _is_figure(token):
        return self.image(tokens, idx, options, env)
    name = token.attrGet("src")[len(FIGURE_PREFIX):]
    figures = env.get("figures")
    if figures is None:
        figures = {n: f"{FIGURES_FOLDER}/{n}.svg" for n in known_figures()}
    if name not in figures:
        raise DeckError(_unknown_figure(name, figures))
    tex = env.get("math_tex", [])
    alt = _MATH_MARK.sub(lambda m: tex[int(m.group(1))], self.renderInlineAsText(token.children or [], options, env))
    out = f'<img class="fmlab-figure" src="{html.escape(figures[name])}" alt="{html.escape(alt)}">'
    if token.meta.get("fmlab_caption") and token.children:
        out += f"\n<figcaption>{self.renderInline(token.children, options, env)}</figcaption>"
    return out


def _protect_math(text: str) -> tuple[str, list[str], list[str]]:
    """Math replaced by FMLABMATH<i>X marks (code left alone): the text, each math's HTML span and its TeX."""
    maths: list[str] = []
    tex: list[str] = []

    def protect(match: re.Match) -> str:
        if match.group("fence") or match.group("code"):
            return match.group(0)
        if match.group("display"):
            body = match.group("display")[2:-2]
            maths.append(f'<span class="math display">\\[{html.escape(body)}\\]</span>')
        else:
            body = match.group("inline")[1:-1]
            maths.append(f'<span class="math inline">\\({html.escape(body)}\\)</span>')
        tex.append(body)
        return f"FMLABMATH{len(maths) - 1}X"

    return _CODE_OR_MATH.sub(protect, text), maths, tex


def render_markdown(text: str, figures: Mapping[str, str] | None = None) -> str:
    """Markdown to HTML, with math kept verbatim for KaTeX as \\( \\) and \\[ \\] spans.

    `figures` maps a figure NAME to the path its `![caption](figure:NAME)` image loads (default: every
    registered figure at figures/NAME.svg); a NAME outside it raises DeckError.
    """
    protected, maths, tex = _protect_math(text)
    rendered = _markdown().render(protected, {"figures": figures, "math_tex": tex})
    return _MATH_MARK.sub(lambda m: maths[int(m.group(1))], rendered)


def _section(slide: Slide, figures: Mapping[str, str]) -> str:
    notes = f'\n<aside class="notes">{render_markdown(slide.notes, figures)}</aside>' if slide.notes else ""
    return f"<section>\n{render_markdown(slide.markdown, figures)}{notes}\n</section>"


def deck_html(deck: Deck, assets: str = "assets", figures: str = FIGURES_FOLDER) -> str:
    """The deck as one reveal.js page that loads reveal.js and KaTeX from `assets` and its figures' SVG files
    from `figures` (relative folders)."""
    paths = {name: f"{figures}/{name}.svg" for name in deck.figures}
    sections = []
    for stack in deck.stacks:
        inner = "\n".join(_section(slide, paths) for slide in stack)
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
    figures: list[Path] = field(default_factory=list)  # the SVG files drawn, one per figure the decks show


def render_figures(names: list[str], folder: Path) -> list[Path]:
    """Draw each named figure to folder/NAME.svg; a figure whose code fails raises DeckError naming it."""
    paths = []
    for name in names:
        try:
            paths.append(render_svg(name, folder / f"{name}.svg"))
        except Exception as e:  # a bug in a figure function: say which figure, keep the cause chained
            raise DeckError(f"figure {name!r} could not be drawn: {type(e).__name__}: {e}") from e
    return paths


def build_decks(source: Path | str = ROOT / "slides", output: Path | str = ROOT / "build" / "slides",
                cache: Path | None = None) -> BuildResult:
    """Every slides/NN_topic.md to output/NN_topic.html, plus output/index.html, the vendored assets and the
    figures the decks show (output/figures/NAME.svg)."""
    start = time.perf_counter()
    source, output = Path(source), Path(output)
    paths = find_decks(source)
    if not paths:
        raise DeckError(f"no decks in {source}/: expected files named like 01_topic.md")
    decks = [read_deck(p) for p in paths]  # parse everything before writing anything
    output.mkdir(parents=True, exist_ok=True)
    vendor_all(output / "assets", **({"cache": cache} if cache else {}))
    figures = render_figures(list(dict.fromkeys(n for deck in decks for n in deck.figures)), output / FIGURES_FOLDER)
    pages = []
    for deck in decks:
        page = output / deck.html_name
        page.write_text(deck_html(deck), encoding="utf-8")
        pages.append(page)
    index = output / "index.html"
    index.write_text(index_html(decks), encoding="utf-8")
    return BuildResult(decks, pages, index, time.perf_counter() - start, figures)


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
    for figure in result.figures:
        print(f"     figure  {os.path.relpath(figure)}")
    figures = f" and {len(result.figures)} figure{'' if len(result.figures) == 1 else 's'}" if result.figures else ""
    print(f"built {len(result.decks)} deck{'' if len(result.decks) == 1 else 's'}{figures} in {result.seconds:.1f} s; "
          f"open {os.path.relpath(result.index)}")
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
  .reveal figure.fmlab-figure {{ margin: 0.2em auto; }}
  .reveal img.fmlab-figure {{ display: block; margin: 0 auto; max-width: 100%; max-height: 500px; background: #fff; }}
  .reveal figure.fmlab-figure figcaption {{ font-size: 0.55em; color: #555; margin-top: 0.2em; }}
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
