"""The load-test arithmetic: nearest-rank percentiles and the per-level figures (no server needed)."""

import math

import pytest

from fmlab.serve.loadtest import LevelResult, RequestTiming, percentile


def test_nearest_rank_percentiles_are_measured_values():
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 50) == 10 and percentile(values, 95) == 19 and percentile(values, 100) == 20
    assert percentile([3.0], 95) == 3.0 and math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_a_level_reports_throughput_and_leaves_failed_requests_out():
    timings = [RequestTiming(0.01 * i, 0.1 * i, 10) for i in range(1, 11)] + [RequestTiming(math.nan, 1.0, 0, "boom")]
    level = LevelResult(4, 2.0, timings)
    row = level.row()
    assert row["requests"] == 10 and row["errors"] == 1
    assert level.tokens_per_s == 50.0  # 100 tokens in 2 s
    assert row["latency p95 (ms)"] == pytest.approx(1000.0) and row["TTFT p50 (ms)"] == pytest.approx(50.0)
    assert timings[0].decode_tokens_per_s == pytest.approx(9 / 0.09)
