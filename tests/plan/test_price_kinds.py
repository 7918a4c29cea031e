"""Every price carries its kind, and two kinds are not compared (issue 40: the course checks its own prices).

    .venv/bin/pytest tests/plan/test_price_kinds.py -v
"""

import json
from pathlib import Path

import pytest

from fmlab.plan import catalog, compute
from fmlab.plan.compute import PlanError

ROOT = Path(__file__).resolve().parents[2]


def test_every_priced_instance_names_its_service_region_and_date():
    for inst in catalog.INSTANCES.values():
        kind = inst.price_kind
        if not inst.price_known:
            assert kind == "none published"
            continue
        assert kind.startswith(("SageMaker training", "EC2 on-demand")), (inst.name, kind)
        assert inst.price_region in kind and inst.price_date in kind


def test_costs_of_one_kind_compare_and_of_two_kinds_are_refused():
    assert compute.one_price_kind("ml.p4d.24xlarge", "ml.trn1.32xlarge").startswith("SageMaker training, on-demand")
    with pytest.raises(PlanError, match="different kinds.*ml.p5.48xlarge: SageMaker.*ml.p5en.48xlarge: EC2"):
        compute.one_price_kind("ml.p5.48xlarge", "ml.p5en.48xlarge")
    with pytest.raises(PlanError, match="no published price"):
        compute.one_price_kind("ml.p5.48xlarge", "ml.trn2.48xlarge")


# Where a notebook puts the costs of several instance types side by side: each cell must say the kind of its prices
# (a column or label from price_kind, price_basis or price_note, capacity's one EC2 basis), or check them equal.
COMPARISONS = {
    "notebooks/01_when_to_pretrain.ipynb": ("ml.p5en.48xlarge", "ml.trn2.48xlarge"),
    "notebooks/09_trainium_continuous_pretraining.ipynb": ("savings", "USD per million tokens"),
    "notebooks/11_pretraining_on_aws_in_2026.ipynb": ("stacks = [", "capacity.Cost(best.reserved_usd"),
}
KIND_WORDS = ("price_kind", "price_basis", "price_note", "one_price_kind", "PRICE_BASIS", "capacity.Cost", "EC2 on-demand")


@pytest.mark.parametrize("notebook, markers", sorted(COMPARISONS.items()))
def test_every_side_by_side_cost_says_the_kind_of_its_prices(notebook, markers):
    cells = ["".join(c["source"]) for c in json.loads((ROOT / notebook).read_text())["cells"]
             if c["cell_type"] == "code"]
    for marker in markers:
        found = [c for c in cells if marker in c and ("cost" in c.lower() or "usd" in c.lower())]
        assert found, f"{notebook}: no cost comparison with {marker!r} (update COMPARISONS if it moved)"
        for cell in found:
            assert any(word in cell for word in KIND_WORDS), f"{notebook}: the cell with {marker!r} compares " \
                                                             "costs without saying their kind"
