"""The solved lab 12 meets the briefs the check draws: the draw leaves the room the lab's method asks for (issue 62).

    .venv/bin/python -m pytest tests/course/test_lab12_seeds.py -q      # about 15 s; 200 seeds: benchmarks/lab12_seeds.py

Before the draw sized its briefs to P(miss) DRAW_MISS, the solution (which sizes to 8% on seeds of its own, as the lab
says to) raised "no plan meets" on 19 of 200 seeds. The seeds below are fixed, so the test is the same in every run.
"""

import importlib.util
from pathlib import Path

import pytest

from fmlab.labs import lab12
from fmlab.plan import capstone

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "lab12_seeds.py"
SEEDS = (8, 13, 18)  # three of the seeds the old draw failed the solution on


def benchmark():
    spec = importlib.util.spec_from_file_location("lab12_seeds", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_the_solution_meets_every_brief_a_seed_draws(seed):
    result = benchmark().one_seed(seed)
    assert result["failures"] == [], result


def test_the_draw_leaves_room_below_the_grade():
    assert 0 < lab12.DRAW_MISS < 0.08 < capstone.MAX_MISS  # the lab tells learners to size to 8%
