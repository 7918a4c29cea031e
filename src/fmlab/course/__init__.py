"""Running and presenting the course: notebooks headless, their recorded figures, slides, widgets and plots.

    from fmlab.course import record
    record("days", plan.days)          # stores a figure in the executed notebook; tests read it back

Files:
- records.py  record() / read_records(): figures a notebook stores for the tests and the report
- params.py   notebook_parameters(): another module's notebook parameters, read from its `parameters` cell
- run.py      execute every notebook and lab solution with papermill (`fmlab course`, `make course`), each in
              a kernel of its own, started as Jupyter starts one
- index.py    notebooks/index.ipynb, generated from what is on disk
- report.py   build/course-report.html: status, seconds and figures of every executed notebook
- slides.py   slides/*.md -> reveal.js decks (`fmlab slides`); vendor.py fetches reveal.js and KaTeX once
- widgets.py  the cost calculator; plots.py the planner's figures
"""

from fmlab.course.records import read_records, record

__all__ = ["read_records", "record"]
