"""fmlab.plan.traffic: communication volumes against their textbook values, claims, SMDDP rules, and the
commands the SageMaker SDK's own drivers build for Torchrun and MPI.

Run: .venv/bin/pytest tests/parallel/test_data_parallel.py
"""

import pytest

from fmlab.plan import traffic
from fmlab.service import smddp


def test_ring_allreduce_sends_two_times_w_minus_one_over_w_of_the_buffer():
    # Patarasuk & Yuan 2009: reduce-scatter + all-gather, each (W-1)/W of the buffer per worker
    assert traffic.ring_allreduce_bytes(1e9, 4, 2) == pytest.approx(4e9)  # 2 workers: send one half, twice
    assert traffic.ring_allreduce_bytes(1e9, 2, 8) == pytest.approx(2 * 7 / 8 * 2e9)
    assert traffic.ring_allreduce_bytes(1e9, 2, 1) == 0  # nothing to average
    big = [traffic.ring_allreduce_bytes(7e9, 2, w) for w in (64, 1024)]
    assert big[1] / big[0] < 1.02  # nearly independent of the number of workers
    with pytest.raises(ValueError, match="workers"):
        traffic.ring_allreduce_bytes(1e9, 2, 0)


def test_a_parameter_server_link_grows_with_the_workers():
    assert traffic.parameter_server_bytes(1e9, 2, 64) == pytest.approx(128e9)
    assert traffic.parameter_server_bytes(1e9, 2, 64, servers=8) == pytest.approx(16e9)
    assert traffic.parameter_server_bytes(1e9, 2, 128) == 2 * traffic.parameter_server_bytes(1e9, 2, 64)


def test_small_formulas():
    assert traffic.transfer_seconds(50e9, 400) == pytest.approx(1.0)  # 400 Gb/s = 50 GB/s
    assert traffic.scaling_efficiency(180.0, 100.0, 2) == pytest.approx(0.9)
    # the LG EXAONE figures of the AWS talk: 10,000 vs 6,300 iterations/day, "about 60% faster"
    smddp = traffic.CLAIMS["exaone_smddp_iterations_per_day"].value
    ddp = traffic.CLAIMS["exaone_ddp_iterations_per_day"].value
    assert traffic.speedup(smddp, ddp) == pytest.approx(0.587, abs=1e-3)
    assert traffic.CLAIMS["smddp_speedup_over_nccl"].value == (0.20, 0.40)  # the lesson's 20-40% claim
    assert traffic.global_batch_tokens(2, 4096, 8, 64) == 4 * 2**20


def test_smddp_advice_follows_the_documented_rules():
    assert not smddp.smddp_advice("ml.g5.48xlarge", 4).helps  # not a supported instance
    assert not smddp.smddp_advice("ml.p4d.24xlarge", 1).helps  # one node: NVLink, NCCL is fine
    allreduce = smddp.smddp_advice("ml.p4d.24xlarge", 16)
    assert allreduce.helps and allreduce.launcher == "MPI"  # AllReduce needs mpirun
    allgather = smddp.smddp_advice("ml.p4de.24xlarge", 8, "allgather")
    assert allgather.helps and allgather.launcher == "Torchrun"
    with pytest.raises(ValueError, match="allreduce"):
        smddp.smddp_advice("ml.p4d.24xlarge", 2, "broadcast")


def test_the_sdk_drivers_build_torchrun_and_mpirun_commands():
    from sagemaker.train.distributed import MPI, Torchrun

    hps = {"max_steps": 10, "backend": "smddp"}
    torchrun = smddp.sagemaker_command(Torchrun(process_count_per_node=8), "ml.p4d.24xlarge", 2, hps)
    assert torchrun[:3] == ["torchrun", "--nnodes=2", "--nproc_per_node=8"]
    assert "entrypoints/train.py" in torchrun and torchrun[-4:] == ["--max_steps", "10", "--backend", "smddp"]
    mpirun = smddp.sagemaker_command(MPI(process_count_per_node=8), "ml.p4d.24xlarge", 2, hps)
    assert mpirun[0] == "mpirun" and "algo-1:8,algo-2:8" in mpirun and "FI_PROVIDER=efa" in mpirun
    assert mpirun[mpirun.index("-m") + 1] == "mpi4py" and mpirun[-1] == "smddp"
    # Open MPI's -np is the total: the SDK's command starts 8 ranks, all on algo-1, for 16 GPUs
    assert mpirun[mpirun.index("-np") + 1] == "8"
    assert smddp.mpirun_ranks(mpirun) == {"total": 8, "per_host": {"algo-1": 8, "algo-2": 0}}
    fixed = smddp.sagemaker_command(MPI(**smddp.mpi_launch(8, 2)), "ml.p4d.24xlarge", 2, hps)
    assert smddp.mpirun_ranks(fixed) == {"total": 16, "per_host": {"algo-1": 8, "algo-2": 8}}
    assert smddp.mpi_launch(8, 1) == {"process_count_per_node": 8, "mpi_additional_options": []}
    with pytest.raises(ValueError, match="does not fit the hosts' slots"):
        smddp.mpirun_ranks(["mpirun", "--host", "a:2,b:2", "-np", "6"])
    with pytest.raises(ValueError, match="Torchrun or MPI"):
        smddp.sagemaker_command(object(), "ml.p4d.24xlarge", 2, hps)
