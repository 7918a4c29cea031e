"""The deck builder: reveal.js Markdown parsing, math and code handling, offline HTML, vendored assets, CLI.

    .venv/bin/pytest tests/course/test_slides.py -v

Building needs the pinned reveal.js and KaTeX tarballs: `npm pack` fetches them once into build/vendor/.
Under CI (CI=true) a build that cannot fetch them fails; elsewhere it skips with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fmlab.cli import main
from fmlab.course import figures, vendor
from fmlab.course.slides import DeckError, build_decks, parse_deck, read_deck, render_markdown

ROOT = Path(__file__).resolve().parents[2]

DECK = """# A fixture deck

Module 0 · tests

Note:
Say hello.
More notes.

---

## Horizontal two

```bash
echo "a fenced --- is no separator"
---
```

--

## Vertical below two

- item with **bold**

---

## Math and money

Params: $12Lh^2 + Vh$, costs $5 and $10, code `x = $y$`.

$$E = mc^2$$

| term | value |
| --- | --- |
| abs | $|x|$ |
"""


def built_or_unavailable(source: Path, output: Path):
    try:
        return build_decks(source, output)
    except vendor.VendorError as e:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"cannot vendor reveal.js/KaTeX under CI: {e}", pytrace=False)
        pytest.skip(f"cannot vendor reveal.js/KaTeX here: {e}")


class _Links(HTMLParser):
    """Every src/href of a page, and how many <section> elements it has."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.sections = 0

    def handle_starttag(self, tag, attrs):
        self.sections += tag == "section"
        self.links += [v for k, v in attrs if k in ("src", "href") and v]


def _links(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text())
    return parser


def test_parse_splits_slides_vertical_slides_and_notes():
    deck = parse_deck(DECK, "00_fixture.md")
    assert deck.title == "A fixture deck"
    assert [len(stack) for stack in deck.stacks] == [1, 2, 1]
    assert deck.slide_count == 4
    title = deck.stacks[0][0]
    assert "Say hello." in title.notes and "More notes." in title.notes and "Note:" not in title.markdown
    assert 'echo "a fenced --- is no separator"\n---\n```' in deck.stacks[1][0].markdown  # fence kept whole
    assert deck.stacks[1][1].markdown.startswith("## Vertical below two")


@pytest.mark.parametrize("text, where", [("# a\n---\n\n---\n## c", "slide 2"), ("# a\n---\n## b\n--\n\n", "slide 2.2")])
def test_an_empty_slide_is_an_error_that_names_it(text, where):
    with pytest.raises(DeckError, match=rf"07_bad.md: {re.escape(where)} is empty; remove the extra"):
        parse_deck(text, "07_bad.md")


def test_an_empty_deck_is_an_error():
    with pytest.raises(DeckError, match="has no slides"):
        parse_deck("\n\n", "08_empty.md")


def test_math_is_kept_for_katex_while_code_and_prices_are_left_alone():
    html = render_markdown("Params $a_1 * b_2$ cost $5 and $10, code `x = $y$`.\n\n| k | v |\n| --- | --- |\n| abs | $|x|$ |")
    assert '<span class="math inline">\\(a_1 * b_2\\)</span>' in html  # no <em> from the `*` or `_`
    assert "<em>" not in html
    assert "cost $5 and $10" in html
    assert "<code>x = $y$</code>" in html
    assert "<td>" + '<span class="math inline">\\(|x|\\)</span>' + "</td>" in html  # the | did not split the cell
    assert '<span class="math display">\\[E &lt; mc^2\\]</span>' in render_markdown("$$E < mc^2$$")


def test_build_writes_offline_decks_and_an_index(tmp_path):
    source = tmp_path / "slides"
    source.mkdir()
    (source / "01_first.md").write_text(DECK)
    (source / "02_second.md").write_text("# Second\n\n---\n\n## Two\n\ntext\n")
    (source / "README.md").write_text("not a deck")
    result = built_or_unavailable(source, tmp_path / "out")

    assert [p.name for p in result.pages] == ["01_first.html", "02_second.html"]
    index = _links(result.index)
    assert index.links == ["01_first.html", "02_second.html"]
    assert "4 slides" in result.index.read_text() and "2 slides" in result.index.read_text()
    for deck, page in zip(result.decks, result.pages, strict=True):
        parsed = _links(page)
        # one <section> per slide, plus one wrapper per stack of vertical slides
        assert parsed.sections == deck.slide_count + sum(len(s) > 1 for s in deck.stacks)
        for link in parsed.links:
            assert not re.match(r"^(https?:)?//", link), f"{page.name} references the network: {link}"
            assert (page.parent / link).is_file(), f"{page.name} links {link}, which was not built"
            if link.endswith(".css"):  # fonts and imports of the stylesheets are local too
                css = (page.parent / link).read_text()
                for url in re.findall(r"url\(['\"]?([^'\")]+)", css):
                    if not url.startswith("data:"):
                        assert not re.match(r"^(https?:)?//", url), f"{link} loads {url}"
                        assert ((page.parent / link).parent / url.split("?")[0].split("#")[0]).is_file(), url
    assert page.read_text().count('<aside class="notes">') == 0  # 02_second has no notes
    assert result.pages[0].read_text().count('<aside class="notes">') == 1
    assert (tmp_path / "out" / "assets" / "reveal.js" / "LICENSE").is_file()


def test_every_course_deck_parses():
    decks = sorted((ROOT / "slides").glob("[0-9][0-9]_*.md"))
    assert decks, "the course has no decks in slides/"
    for path in decks:
        deck = read_deck(path)
        assert deck.slide_count >= 3, f"{path.name} has {deck.slide_count} slides"
        assert deck.title != path.stem, f"{path.name} has no '# title' line"


def test_cli_builds_decks_and_reports_bad_input(tmp_path, capsys):
    source = tmp_path / "slides"
    source.mkdir()
    (source / "01_ok.md").write_text("# Ok\n\n---\n\nsecond\n")
    code = main(["slides", "--source", str(source), "--output", str(tmp_path / "out")])
    out = capsys.readouterr()
    if code == 2 and "npm" in out.err:
        built_or_unavailable(source, tmp_path / "out")  # fails under CI, skips elsewhere, with the reason
    assert code == 0, out.err
    assert "2 slides" in out.out and (tmp_path / "out" / "01_ok.html").is_file()

    (source / "02_bad.md").write_text("# Bad\n---\n\n---\nthird\n")
    assert main(["slides", "--source", str(source), "--output", str(tmp_path / "out2")]) == 2
    assert "02_bad.md: slide 2 is empty" in capsys.readouterr().err
    assert not (tmp_path / "out2" / "01_ok.html").exists()  # nothing written when a deck is bad


def test_a_tampered_tarball_is_rejected_and_deleted(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    tarball = cache / vendor.KATEX.tarball
    tarball.write_bytes(b"not the katex tarball")
    with pytest.raises(vendor.VendorError, match="the pin says"):
        vendor.fetch(vendor.KATEX, cache)
    assert not tarball.exists()


def test_without_npm_the_error_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(vendor.VendorError, match=r"npm is not installed.*katex-0\.16\.\d+\.tgz"):
        vendor.fetch(vendor.KATEX, tmp_path)


# ---------------------------------------------------------------- figures drawn by the package

FIGURE_DECK = """# Figures

---

## A plan

![The *phased* plan of gpt-30b](figure:gpt30b_ladder)

Note:
The same figure again in the notes ![again](figure:gpt30b_ladder); `![code](figure:not_a_figure)` is code.
"""


def test_a_figure_reference_renders_as_a_figure_with_its_caption():
    html = render_markdown("## T\n\n![Memory, $16P$ bytes](figure:gpt30b_memory)\n\n`![x](figure:nope)`",
                           {"gpt30b_memory": "figures/gpt30b_memory.svg"})
    assert '<figure class="fmlab-figure"><img class="fmlab-figure" src="figures/gpt30b_memory.svg" ' in html
    assert 'alt="Memory, 16P bytes"' in html  # math in the caption: TeX in the alt text, KaTeX in the caption
    assert '<figcaption>Memory, <span class="math inline">\\(16P\\)</span> bytes</figcaption></figure>' in html
    assert "<code>![x](figure:nope)</code>" in html  # inline code is left alone
    assert '<img src="a.png" alt="a" />' in render_markdown("![a](a.png)")  # ordinary images unchanged


def test_a_deck_with_a_figure_builds_its_svg_beside_the_page(tmp_path):
    source = tmp_path / "slides"
    source.mkdir()
    (source / "01_fig.md").write_text(FIGURE_DECK)
    result = built_or_unavailable(source, tmp_path / "out")

    svg = tmp_path / "out" / "figures" / "gpt30b_ladder.svg"
    assert result.figures == [svg]  # drawn once, although the deck shows it twice
    assert result.decks[0].figures == ["gpt30b_ladder"]
    text = svg.read_text()
    assert "<svg" in text and "<text" not in text  # text drawn as paths: the SVG needs no font
    assert not re.search(r"<image[^>]+href=\"(https?:)?//", text)  # nothing loaded from the network
    page = result.pages[0].read_text()
    assert '<img class="fmlab-figure" src="figures/gpt30b_ladder.svg" alt="The phased plan of gpt-30b">' in page
    assert "<figcaption>The <em>phased</em> plan of gpt-30b</figcaption>" in page
    links = _links(result.pages[0]).links
    assert "figures/gpt30b_ladder.svg" in links
    for link in links:  # every file the page loads was built, the figure included
        assert not re.match(r"^(https?:)?//", link) and (result.pages[0].parent / link).is_file(), link


def test_an_unknown_figure_fails_the_build_and_names_the_known_ones(tmp_path, capsys):
    text = "# Deck\n\n---\n\n## Two\n\n--\n\n## Below\n\n![oops](figure:gpt30b_memroy)\n"
    with pytest.raises(DeckError, match=r"09_bad.md: slide 2.2: unknown figure 'gpt30b_memroy': known figures are "
                                        r"capstone_outcomes, checkpoint_interval, data_parallel_traffic, data_volume, "
                                        r"eval_curve, "
                                        r"gpt30b_ladder, gpt30b_memory, hybrid_traffic, job_mtbf, layout_memory, "
                                        r"lr_sweep, pipeline_schedule, recovery_goodput, serving_latency"):
        parse_deck(text, "09_bad.md")
    with pytest.raises(DeckError, match="unknown figure 'nope'"):
        render_markdown("![x](figure:nope)", {})

    source = tmp_path / "slides"
    source.mkdir()
    (source / "01_ok.md").write_text("# Ok\n\n---\n\nsecond\n")
    (source / "02_bad.md").write_text(text)
    assert main(["slides", "--source", str(source), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "02_bad.md: slide 2.2: unknown figure 'gpt30b_memroy'" in err and "gpt30b_memory" in err
    assert not (tmp_path / "out").exists()  # nothing written, as for any bad deck


def test_every_registered_figure_draws_a_deterministic_svg(tmp_path):
    assert set(figures.FIGURES) >= {"gpt30b_memory", "gpt30b_ladder", "hybrid_traffic", "job_mtbf",
                                    "checkpoint_interval", "layout_memory", "data_volume", "lr_sweep",
                                    "data_parallel_traffic", "pipeline_schedule", "eval_curve", "serving_latency",
                                    "recovery_goodput", "capstone_outcomes"}
    for name, draw in figures.FIGURES.items():
        assert draw.__doc__ and len(draw.__doc__.strip()) > 40, f"figure {name} needs a docstring"
        path = figures.render_svg(name, tmp_path / f"{name}.svg")
        assert path.stat().st_size > 10_000 and path.read_text().lstrip().startswith("<?xml")
    again = figures.render_svg("gpt30b_ladder", tmp_path / "again.svg")
    assert again.read_bytes() == (tmp_path / "gpt30b_ladder.svg").read_bytes()
    with pytest.raises(figures.UnknownFigure, match="known figures: capstone_outcomes, checkpoint_interval, "
                                                     "data_parallel_traffic, "
                                                     "data_volume, eval_curve, gpt30b_ladder, gpt30b_memory, "
                                                     "hybrid_traffic, job_mtbf, layout_memory, lr_sweep, "
                                                     "pipeline_schedule, recovery_goodput, serving_latency"):
        figures.figure("nope")


def test_the_memory_figure_shows_what_the_planner_computes():
    plans = figures.gpt30b_plans()
    assert list(plans) == [label for _, label, _ in figures.GPT30B_LAYOUTS]
    fig = figures.gpt30b_memory()
    ax = fig.axes[0]
    bars = [patch for patch in ax.patches if patch.get_height() > 0]
    assert len(bars) == 4 * len(plans)  # weights, gradients, optimizer state, activations per layout
    tops = {}
    for bar in bars:
        i = round(bar.get_x() + bar.get_width() / 2)
        tops[i] = max(tops.get(i, 0.0), bar.get_y() + bar.get_height())
    for i, plan in enumerate(plans.values()):
        assert tops[i] == pytest.approx(plan.memory_gb_per_device)
        faded = [b.get_alpha() for b in bars if round(b.get_x() + b.get_width() / 2) == i]
        assert all((a == 1.0) == plan.fits for a in faded)  # layouts that do not fit are drawn pale
    dashed = [line.get_ydata()[0] for line in ax.lines if line.get_linestyle() == "--"]
    assert dashed == [plans["full (128)"].memory_limit_gb]  # what a plan may fill: usable less the headroom
    assert plans["full (128)"].fits and not plans["hybrid 8"].fits and not plans["hybrid 64"].fits
