"""Lab 09's checks reject the plausible wrong answers, and accept the right ones given by hand.

Run: .venv/bin/pytest tests/neuron/test_lab09_checks.py -q
"""

import pytest

from fmlab.labs import lab09


@pytest.mark.parametrize("check,right,wrongs", [
    (lab09.check_shard_shape, (7168, 8192), [(3584, 8192), (57344, 8192), (7168, 1024)]),  # gate only; unsplit
    (lab09.check_stages, [1, 4, 5], [[0, 4, 4], [1, 5, 5]]),  # remainder to the first stages; 80 // 6 per stage
    (lab09.check_kv_multiplier, 4, [1, 2, 32, 4.5]),
])
def test_checks_accept_the_answer_and_reject_near_misses(check, right, wrongs):
    assert check(right)
    for wrong in wrongs:
        assert not check(wrong)


def test_round_trip_check_rejects_a_copy_of_the_original(tmp_path):
    original = lab09.make_tiny_llama(tmp_path / "tiny")
    assert not lab09.check_round_trip((tmp_path / "no-such-checkpoint", original))
