"""fmlab.course.record: figures a notebook stores for the tests and the report, recorded quietly."""

import IPython.display

from fmlab.course import record
from fmlab.course.records import MIME


def test_record_is_quiet_unless_asked(monkeypatch):
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append(obj))
    assert record("nb.days", 40.91) == 40.91  # the value comes back: a cell ending with record(...) shows it once
    assert shown[-1]["text/plain"] == "" and shown[-1][MIME] == {"nb.days": 40.91}
    record("nb.cost", 5, show=True)
    assert shown[-1]["text/plain"] == "nb.cost = 5"
