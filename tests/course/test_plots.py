"""fmlab.course.plots.live_loss: redraws while a job runs, only when there is something new to draw.

Run: .venv/bin/pytest tests/course/test_plots.py -q   (a second; a stand-in job, no processes)
"""

import pandas as pd

from fmlab.course import plots


class FakeJob:
    """A job whose status and metrics advance one poll at a time (the same for several polls: no new lines)."""

    name = "fake"

    def __init__(self, timeline):
        self.timeline, self.polls = timeline, 0

    def status(self):
        self.polls += 1
        return self.timeline[min(self.polls, len(self.timeline)) - 1][0]

    def metrics(self):
        rows = self.timeline[min(self.polls, len(self.timeline)) - 1][1]
        return pd.DataFrame({"step": range(1, rows + 1), "loss": [5.0 - 0.1 * i for i in range(rows)]})


def test_live_loss_draws_only_what_changed_and_ends_with_the_job(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    drawn = []

    class Handle:  # what display(..., display_id=True) returns in a kernel
        def update(self, fig):
            drawn.append(len(fig.axes[0].lines[0].get_xdata()) if fig.axes[0].lines else 0)

    monkeypatch.setattr("IPython.display.display", lambda *a, **k: Handle())
    timeline = [("Training", 0), ("Training", 2), ("Training", 2), ("Training", 2), ("Training", 5),
                ("Completed", 5)]
    job = FakeJob(timeline)
    fig = plots.live_loss(job, poll=0.001)
    assert job.polls == len(timeline)  # it polled until the job ended, and no longer
    assert drawn == [0, 2, 5, 5]  # every change drawn once (the last with the final status); the repeats never
    assert fig.axes[0].get_title() == "fake: Completed"
