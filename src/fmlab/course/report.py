"""The course report: build/course-report.html, one row per executed notebook and lab solution.

    python -m fmlab course                     # runs the course, prints the table, then writes the report
    python -m fmlab.course.report build/executed      # rebuilds the report from notebooks executed earlier

Each row gives the status, the seconds the notebook took, the key figures it recorded with
`fmlab.course.records.record(name, value)` (days and cost from module 1, a speed-up from module 2, lab checks...),
and a link to the executed notebook rendered as HTML by nbconvert (written beside the .ipynb).

The pages work offline, like the slide decks: nbconvert's lab template is used with every block that loads a
script from a CDN removed (require.js, MathJax, Mermaid, the widget manager; OFFLINE_TEMPLATE), and math is
typeset by KaTeX, vendored from its pinned npm package (fmlab.course.vendor) into `report-assets/` beside the
report. Without the KaTeX tarball (no npm, no network) the pages still render, with the TeX left as written.
"""

from __future__ import annotations

import html
import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fmlab.course.records import read_records
from fmlab.course.run import NotebookResult
from fmlab.environment import ROOT

DEFAULT_REPORT = ROOT / "build" / "course-report.html"
ASSETS_FOLDER = "report-assets"  # beside the report: report-assets/katex/...

# nbconvert's lab template without the blocks that load scripts from a CDN (require.js, MathJax, Mermaid and the
# widget manager), and KaTeX from a local folder instead of MathJax when `resources["fmlab_katex"]` names one.
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
{%- if resources.fmlab_katex -%}
<link rel="stylesheet" href="{{ resources.fmlab_katex }}/dist/katex.min.css">
<script defer src="{{ resources.fmlab_katex }}/dist/katex.min.js"></script>
<script defer src="{{ resources.fmlab_katex }}/dist/contrib/auto-render.min.js"
  onload="renderMathInElement(document.body, {delimiters: [{left: '$$', right: '$$', display: true},
  {left: '$', right: '$', display: false}, {left: '\\\\(', right: '\\\\)', display: false},
  {left: '\\\\[', right: '\\\\]', display: true}], ignoredClasses: ['jp-OutputArea', 'jp-InputArea-editor'],
  throwOnError: false});"></script>
{%- endif -%}
{%- endblock html_head_js_mathjax -%}
"""


def vendor_katex(folder: Path) -> Path | None:
    """KaTeX unpacked under folder/katex (fmlab.course.vendor's pin), or None when it cannot be had here."""
    from fmlab.course.vendor import KATEX, VendorError, unpack

    try:
        return unpack(KATEX, folder)
    except VendorError:
        return None


def render_notebook(executed: Path, katex: Path | None = None) -> Path:
    """executed/NN_x.ipynb -> executed/NN_x.html: nbconvert's lab template, outputs as the run left them, nothing
    loaded from the network; `katex` is the folder of a vendored KaTeX to typeset math (None: TeX left as is)."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"fmlab_offline.html.j2": OFFLINE_TEMPLATE})],
                            template_file="fmlab_offline.html.j2")
    page = executed.with_suffix(".html")
    resources = {"fmlab_katex": os.path.relpath(katex, page.parent).replace(os.sep, "/") if katex else ""}
    body, _ = exporter.from_filename(str(executed), resources=resources)
    page.write_text(body, encoding="utf-8")
    return page


def result_from_executed(executed: Path, source: Path | None = None) -> NotebookResult:
    """A NotebookResult read back from a notebook papermill executed: duration, exception, records."""
    nb = json.loads(executed.read_text(encoding="utf-8"))
    meta = nb.get("metadata", {}).get("papermill", {})
    error = ""
    if meta.get("exception"):
        for cell in nb.get("cells", []):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    error = f"{out.get('ename', 'Error')}: {out.get('evalue', '')}".strip()
        error = error or "the notebook raised an exception"
    source = source or Path(meta.get("input_path") or executed.name)
    return NotebookResult(source, executed, float(meta.get("duration") or 0.0), not error, error,
                          read_records(executed))


def results_from_folder(folder: Path | str) -> list[NotebookResult]:
    """Every executed notebook under folder/notebooks then folder/labs, in course order."""
    folder = Path(folder)
    found = sorted((folder / "notebooks").glob("*.ipynb")) + sorted((folder / "labs").glob("*.ipynb"))
    if not found:
        raise FileNotFoundError(f"no executed notebooks under {folder}/notebooks or {folder}/labs: "
                                f"run `python -m fmlab course` first")
    return [result_from_executed(p) for p in found]


def format_value(value: Any) -> str:
    """A recorded figure as a short human string: 41.23, 592,341, yes, {8: 82.5, 16: 41.2}."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e9 or abs(value) < 1e-3):
            return f"{value:.3e}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(value)


def _kind(result: NotebookResult) -> str:
    return "lab" if result.source.name.startswith("lab_") else "notebook"


def _minutes(result: NotebookResult) -> str:
    """The notebook's (or lab's) minutes on each path (fmlab.course.paths), or '' without the times file."""
    from fmlab.course import paths, times

    try:
        data = times.load()
    except (OSError, ValueError):
        return ""
    stem, out = result.source.stem, []
    for path in paths.PATH_NAMES:
        if stem in data["labs"]:
            minutes = data["labs"][stem]["minutes"] if stem in paths.labs(path, data) else None
        else:
            row = next((r for r in paths.rows(path, data) if r.module == stem), None)
            minutes = row.minutes if row else None
        out.append("-" if minutes is None else f"{minutes:.0f}")
    return " / ".join(out)


def _paths_line() -> str:
    from fmlab.course import paths, times

    try:
        data = times.load()
    except (OSError, ValueError):
        return ""
    totals = ", ".join(f"{p} {paths.total_minutes(p, data) / 60:.1f} h" for p in paths.PATH_NAMES)
    return f"Paths, with breaks: {totals}. Minutes: {times.METHOD}."


def _row(result: NotebookResult, report_dir: Path, katex: Path | None = None) -> str:
    page, problem = None, "no output"
    if result.output.exists():
        try:
            page = render_notebook(result.output, katex)
        except Exception as e:  # a half-written notebook must not stop the report
            problem = f"not rendered: {type(e).__name__}: {e}"
    link = (f'<a href="{html.escape(os.path.relpath(page, report_dir))}">executed</a>' if page
            else f'<span class="missing">{html.escape(problem)}</span>')
    status = '<td class="ok">ok</td>' if result.ok else '<td class="failed">FAILED</td>'
    figures = "".join(f"<tr><th>{html.escape(name)}</th><td>{html.escape(format_value(value))}</td></tr>"
                      for name, value in result.records.items())
    figures = f'<table class="figures">{figures}</table>' if figures else '<span class="missing">none</span>'
    error = f'<div class="error">{html.escape(result.error)}</div>' if result.error else ""
    return (f'<tr class="result" data-notebook="{html.escape(result.source.name)}">'
            f"<td>{html.escape(result.source.stem)}{error}</td><td>{_kind(result)}</td>{status}"
            f'<td class="seconds">{result.seconds:.1f}</td><td class="seconds">{_minutes(result)}</td>'
            f"<td>{figures}</td><td>{link}</td></tr>")


def write_report(results: list[NotebookResult], path: Path | str = DEFAULT_REPORT) -> Path:
    """Write the HTML report (and each executed notebook's HTML page, offline: KaTeX in report-assets/ beside
    the report); returns the report's path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    katex = vendor_katex(path.parent / ASSETS_FOLDER) if any(r.output.exists() for r in results) else None
    rows = "\n".join(_row(r, path.parent.resolve(), katex) for r in results)
    passed = sum(r.ok for r in results)
    summary = (f"{passed}/{len(results)} ok · {sum(r.seconds for r in results):.1f} s in all · "
               f"Python {platform.python_version()} on {platform.machine()} · "
               f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    path.write_text(_PAGE.format(summary=html.escape(summary), paths=html.escape(_paths_line()), rows=rows),
                    encoding="utf-8")
    return path


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Course report · Pretraining Foundation Models on AWS</title>
<style>
  body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
  table.results {{ border-collapse: collapse; width: 100%; }}
  table.results > tbody > tr > td, table.results > thead > tr > th {{ border-bottom: 1px solid #ddd;
    padding: 0.5em; text-align: left; vertical-align: top; }}
  td.ok {{ color: #1a7f37; font-weight: bold; }}
  td.failed {{ color: #cf222e; font-weight: bold; }}
  td.seconds {{ text-align: right; font-variant-numeric: tabular-nums; }}
  table.figures th {{ font-weight: normal; color: #555; padding-right: 1em; text-align: left; }}
  table.figures td {{ font-variant-numeric: tabular-nums; }}
  .error {{ color: #cf222e; font-size: 0.85em; margin-top: 0.3em; }}
  .missing {{ color: #999; }}
</style>
</head>
<body>
<h1>Course report</h1>
<p class="summary">{summary}</p>
<p class="paths">{paths}</p>
<table class="results">
<thead><tr><th>notebook</th><th>kind</th><th>status</th><th>seconds</th>
<th>minutes: one day / two days / full course</th><th>key figures recorded</th>
<th>output</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
</body>
</html>
"""


if __name__ == "__main__":
    report = write_report(results_from_folder(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "executed"))
    print(f"wrote {os.path.relpath(report)}")
