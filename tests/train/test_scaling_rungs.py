"""fmlab.train.scaling_rungs: Kaplan's power law fitted by least squares in log-log (milliseconds; the rungs
themselves train in notebook 01's test)."""

import math

import pytest

from fmlab.train.scaling_rungs import fit_power_law, rung_preset


def test_the_fit_recovers_a_known_law():
    """Kaplan et al. 2020: alpha_N = 0.076, N_c = 8.8e13 for L(N) = (N_c / N)^alpha_N."""
    ns = [1e6, 1e7, 1e8, 1e9]
    law = fit_power_law(ns, [(8.8e13 / n) ** 0.076 for n in ns])
    assert law.alpha == pytest.approx(0.076, rel=1e-9) and law.n_c == pytest.approx(8.8e13, rel=1e-6)
    assert law.predict(1e10) == pytest.approx((8.8e13 / 1e10) ** 0.076)


def test_a_fit_needs_two_sizes():
    with pytest.raises(ValueError, match="two rungs"):
        fit_power_law([1e6, 1e6], [3.0, 2.9])
    with pytest.raises(ValueError, match="two rungs"):
        fit_power_law([1e6], [3.0])


def test_the_rungs_grow_in_width_only():
    small, big = rung_preset(16), rung_preset(64)
    assert (small.layers, small.vocab) == (big.layers, big.vocab) and big.hidden == 4 * small.hidden
    assert big.hidden // big.heads == 16 and math.isclose(big.ffn / big.hidden, 8 / 3, rel_tol=0.05)
