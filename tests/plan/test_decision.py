"""The pretraining checklist and the calculator's output."""

import re

import pytest

from fmlab.course.widgets import calculator_result, cost_calculator
from fmlab.plan.decision import QUESTIONS, recommend


def test_all_yes_means_pretrain():
    assert recommend({q.key: True for q in QUESTIONS})[0] == "pretrain"


def test_untried_prompting_comes_first():
    verdict, reasons = recommend({})
    assert verdict == "prompt" and len(reasons) == len(QUESTIONS)


def test_no_data_means_continue_pretraining():
    answers = {q.key: True for q in QUESTIONS} | {"data_at_scale": False}
    assert recommend(answers)[0] == "continue pretraining"


def test_unknown_key_is_an_error():
    with pytest.raises(KeyError, match="prompting_tried"):
        recommend({"prompting": True})


def _days(html: str) -> float:
    return float(re.search(r'class="fmlab-days">([\d,.]+)<', html).group(1).replace(",", ""))


def test_calculator_days_halve_when_instances_double():
    a = calculator_result("gpt-30b", 300, "ml.p4d.24xlarge", 16, 0.4)
    b = calculator_result("gpt-30b", 300, "ml.p4d.24xlarge", 32, 0.4)
    assert _days(b) == pytest.approx(_days(a) / 2, abs=0.1)
    assert 'class="fmlab-fits">yes' in a


def test_calculator_shows_impossible_plans_as_errors():
    assert "Impossible plan" in calculator_result("gpt-30b", 300, "ml.g5.12xlarge", 3, 0.4, sharding="hybrid", hybrid_shard_degree=5)


def test_widget_updates_on_change():
    box = cost_calculator()
    controls, result = box.children
    count = next(c for c in controls.children if "fmlab-calc-count" in c._dom_classes)
    before = _days(result.value)
    count.value = count.value * 2
    assert _days(result.value) == pytest.approx(before / 2, abs=0.1)
