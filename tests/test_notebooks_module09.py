"""Lab 09 (Trainium checkpoints): the solved lab writes the legacy NxD file tree it asks for (pass/fail of
every lab is in tests/test_labs.py).

Run: .venv/bin/pytest tests/test_notebooks_module09.py -q   (notebook 09 itself comes with the jobs work)
"""

import pytest

pytestmark = pytest.mark.notebook


def test_lab09_solution_passes_every_check(run_notebook, tmp_path):
    r = run_notebook("labs/solutions/lab_09_trainium.ipynb", work_dir=str(tmp_path / "work"))
    assert r.ok, r.error
    assert r.records["lab.passed"] == r.records["lab.total"] == 4
    assert sorted(p.name for p in (tmp_path / "work" / "nxd").iterdir()) == [
        f"tp_rank_{t:02d}_pp_rank_{p:02d}" for t in range(4) for p in range(2)]
