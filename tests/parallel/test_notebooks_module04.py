"""Notebook 04 (data parallelism) and lab 04 run under papermill; assert on the figures they recorded.

Run: .venv/bin/pytest tests/parallel/test_notebooks_module04.py   (the notebook launches torchrun twice: ~30 s)
"""

import math

import pytest

from fmlab.course import guide
from fmlab.course.run import bare_figures
from fmlab.plan import catalog, compute

pytestmark = pytest.mark.notebook


def test_data_parallel_notebook(run_notebook):
    r = run_notebook("notebooks/04_data_parallel.ipynb", processes=[1, 2], global_batch=8, steps=6)
    assert r.ok, r.error
    guide.assert_quoted(r.records, "nb04")  # the figures docs/instructor.md quotes
    assert bare_figures(r.output) == []  # cell 6's traffic figure is drawn, not printed as "<Figure size ...>"
    rec = r.records
    assert rec["same_sequences"] is True  # 2 ranks together read the 1-process batch
    # the loader against the step: tokenizing in the step's process makes it wait (about 50x the shards' wait here;
    # held at 3x), and every (source, workers) pair was measured
    waits = {(w["source"], w["workers"]): w for w in rec["nb04.loader_wait"]}
    assert set(waits) == {(s, n) for s in ("pre-tokenized shards", "tokenized on the fly") for n in (0, 1, 2)}
    assert (waits["tokenized on the fly", 0]["wait ms per step"]
            > 3 * waits["pre-tokenized shards", 0]["wait ms per step"])
    params = compute.param_count(catalog.model("llama2-7b"))  # 6.74B (Touvron et al. 2023)
    assert rec["ring_gb_64"] == pytest.approx(2 * 63 / 64 * params * 2 / 1e9, abs=0.01)
    assert rec["ps_gb_64"] == pytest.approx(64 * params * 2 / 1e9, abs=0.1)
    assert rec["ring_steps_64"] == 126  # 2(W-1) sequential steps: 63 reduce-scatter + 63 all-gather
    # Herring on 8 x p4d: shards on the instances' CPUs put 2(I-1)/I of the buffer on each EFA link, as a ring
    # among the 8 instances would; each shard carries I x S / N = S; separate server machines halve it to S.
    assert rec["herring_instance_gb_8"] == pytest.approx(2 * 7 / 8 * params * 2 / 1e9, abs=0.01)
    assert rec["herring_shard_gb_8"] == pytest.approx(params * 2 / 1e9, abs=0.01)
    assert rec["herring_apart_gb_8"] == pytest.approx(params * 2 / 1e9, abs=0.01)
    assert rec["herring_instance_gb_8"] < rec["ring_gb_64"] < 2 * rec["herring_apart_gb_8"]
    # DDP on 2 processes = 1 process on the concatenated batch, up to float32 summation order
    assert rec["grad_tensors"] == 21
    assert rec["grad_max_abs_diff"] < 1e-6 and rec["grad_rel_diff"] < 1e-5
    assert rec["max_loss_diff"] < 1e-5
    assert rec["final_loss"] < math.log(512)  # it trained
    rates = rec["tokens_per_s"]
    assert set(rates) == {"1", "2"} and min(rates.values()) > 0
    # both recorded to 3 decimals: a relative tolerance failed on a loaded machine (speedup 0.291, efficiency 0.146)
    assert rec["speedup"] == pytest.approx(rates["2"] / rates["1"], abs=6e-4)
    assert rec["scaling_efficiency"] == pytest.approx(rec["speedup"] / 2, abs=8e-4)
    assert 0 <= rec["data_share"] < 1
    assert rec["exaone_speedup"] == pytest.approx(10_000 / 6_300 - 1, abs=1e-4)  # "about 60% faster"
    assert rec["smddp_helps"] == {"2 x ml.g5.48xlarge (allreduce)": False, "1 x ml.p4d.24xlarge (allreduce)": False,
                                  "16 x ml.p4d.24xlarge (allreduce)": True, "8 x ml.p4de.24xlarge (allgather)": True}
    assert rec["smddp_available_here"] is False
    assert (rec["torchrun_command"], rec["mpirun_command"]) == ("torchrun", "mpirun")
    assert rec["mpirun_ranks_sdk"] == 8  # SDK v3's -np: 8 ranks for 2 x 8 GPUs
    assert rec["mpirun_ranks_fixed"] == {"algo-1": 8, "algo-2": 8}
    # SMDDP is frozen (fmlab.service.libraries) and SDK v3's MPI command lacks what SDK v2's runner set for it
    assert rec["smddp_status"] == {"smddp": "frozen", "smp": "frozen", "last_smp": "2.8.0", "last_dlc_with_smddp": "2.5"}
    assert rec["v2_runner_missing"][:4] == ["smddprun", "SMDATAPARALLEL_USE_HOMOGENEOUS=1", "SMDATAPARALLEL_SERVER_ADDR=",
                                            "SMDATAPARALLEL_SERVER_PORT=7592"]
    assert "FI_PROVIDER=efa" not in rec["v2_runner_missing"]
    assert rec["driver_drift"] == []
