"""Lab 08's exercise 2 check tells a numeric step comparison from a string one (a few seconds: the check
builds its checkpoints with 2 real processes)."""

import json
from pathlib import Path

from fmlab.labs import lab08


def _complete(path: Path) -> bool:
    try:
        files = json.loads((path / lab08.MARKER).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return bool(files) and all((path / n).is_file() and (path / n).stat().st_size == s for n, s in files.items())


def by_text(folder):
    """Right in every way but one: it takes the newest as the highest name, as text."""
    found = [p for p in Path(folder).glob("step_*") if p.name[5:].isdigit() and _complete(p)] \
        if Path(folder).is_dir() else []
    return max(found, key=lambda p: p.name) if found else None


def by_number(folder):
    found = [p for p in Path(folder).glob("step_*") if p.name[5:].isdigit() and _complete(p)] \
        if Path(folder).is_dir() else []
    return max(found, key=lambda p: int(p.name[5:])) if found else None


def test_ex2_fails_a_string_comparison_and_passes_a_numeric_one(tmp_path, capsys):
    assert lab08.check_latest(by_text, tmp_path) is False
    out = capsys.readouterr().out
    assert "step_9 and step_10" in out and "picked step_9, expected step_10" in out
    assert lab08.check_latest(by_number, tmp_path) is True
    assert lab08.check_latest(lab08.reference_latest, tmp_path) is True
