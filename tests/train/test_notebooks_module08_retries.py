"""Module 8: notebook 08_retries_and_hangs, executed with papermill: a retried sandbox job, a hung peer, hung worlds.

Run: .venv/bin/pytest tests/train/test_notebooks_module08_retries.py -q   (60-75 s: a job, a 2-process run,
two hung worlds)

What the runs did is checked: the sandbox retries a job whose instance was lost (two attempts, one Restarting);
a hung peer fails within the collective timeout; a hung rank of 4 and a rank that skipped an all-reduce are named
from their collective traces; the detection time's cost comes from the planner's arithmetic.
"""

import json
from pathlib import Path

import pytest

from fmlab.course import guide
from fmlab.plan import reliability

pytestmark = pytest.mark.notebook

NOTEBOOK = "notebooks/08_retries_and_hangs.ipynb"


def test_notebook08_retries_a_lost_instance_and_names_the_hung_rank(run_notebook, local_env):
    r = run_notebook(NOTEBOOK)
    assert r.ok, r.error
    guide.assert_quoted(r.records, "nb08r")  # the figures docs/instructor.md quotes
    rec = r.records
    assert rec["nb08.retry"] == {"status": "Completed", "attempts": 2, "restarting": 1}
    assert rec["nb08.hung"]["exit"] != 0 and rec["nb08.hung"]["seconds"] < 60  # a 3 s timeout, not a hang
    detection = rec["nb08.detection"]  # section 3: a hang's cost, and the hung rank named from the traces
    assert detection["seconds"] == [600, 85] and detection["wasted_pct"][0] > detection["wasted_pct"][1]
    # ... and at Llama 3's 2,048 nodes (MTBF 3.09 h), where the default timeout alone costs more than every cause
    # together with the short one: recomputed here from the planner
    big = reliability.LLAMA3_405B.gpus // reliability.LLAMA3_405B.gpus_per_node
    mtbf = reliability.job_mtbf_hours(big)
    assert detection["nodes"] == [16, big] == [16, 2048] and round(mtbf, 2) == 3.09
    alone = [round(100 * reliability.hang_detection_hours(*a) / mtbf, 2) for a in ((600, 0), ())]
    assert detection["alone_pct_at_scale"] == alone == [5.39, 0.76]
    assert detection["alone_pct_at_scale"][0] > detection["wasted_pct_at_scale"][1] > detection["alone_pct_at_scale"][1]
    message = rec["nb08.retry_message"]  # the sandbox's Restarting message: one level of parentheses at most
    depth = max(message[:i].count("(") - message[:i].count(")") for i in range(len(message) + 1))
    assert message.startswith("InternalServerError: instance algo-") and depth <= 1, message
    hangs = rec["nb08.hangs"]
    assert (hangs["hang"]["kind"], hangs["hang"]["ranks"], hangs["hang"]["step"]) == ("missing", [2], 3)
    assert hangs["hang"]["seconds"] < 30 and hangs["skip"] == {"ranks": [1], "step": 3, "kind": "desync"}
    assert rec["nb08r.seconds"] < 300  # a hang guard: every drill has its own timeout; 35-50 s on 2 cores


def test_notebook08_teaches_what_sagemaker_retries_and_what_it_does_not():
    """The prose, read without running: a dead process is an AlgorithmError (not retried), a lost instance an
    InternalServerError (retried), a GPU fault goes through cluster repair; each with its source."""
    nb = json.loads(Path(NOTEBOOK).read_text())
    text = " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "as a lost GPU or the kernel's OOM killer would" not in text
    assert "restarts the whole job on fresh instances after an `InternalServerError`" not in text
    # on SageMaker nothing restarts a dead process inside the job: SDK v3's Torchrun has no restart option
    assert "torchrun `--max-restarts` inside the job" not in text and "is what recovers a dead process" not in text
    for needle in ("`AlgorithmError`", "| **no** |", "`InternalServerError`", "cluster repair", "auto-resume",
                   "--max-restarts", "`RetryStrategy` API reference", "SDK v3's torchrun driver passes no",
                   "fmlab.service.retry.DEAD_PROCESS",
                   "model-checkpoints-cluster-repair.html", "sagemaker-hyperpod-resiliency-slurm-auto-resume.html"):
        assert needle in text, needle
