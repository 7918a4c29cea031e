"""The engine's device choice (fmlab.parallel.mesh.choose_device): cuda, neuron or cpu from where the script runs,
with the process-group backend that goes with it. Covered on CPU by replacing the probes: no test pretends that
a Neuron device exists beyond the probe itself, and on this machine the real probes find neither.

Run: .venv/bin/pytest tests/parallel/test_device_choice.py -q

The Neuron facts are from the Neuron docs (read 2026-11-23): "How to use torch.distributed on Neuron"
(init_process_group(backend="neuron"), tensors on torch.device("neuron")) and "TorchNeuron: Native PyTorch on AWS
Neuron" (torch.accelerator reports the neuron device).
"""

import sys
import types

import pytest
import torch

from fmlab.parallel import mesh
from fmlab.parallel.config import ParallelConfig
from fmlab.parallel.precision import compute_dtype
from fmlab.plan.compute import PlanError


def test_this_machine_is_a_cpu_and_the_probes_say_so():
    assert not torch.cuda.is_available()
    assert mesh.neuron_present() is False  # torch_neuronx is not installed here
    assert mesh.choose_device() == mesh.DeviceChoice("cpu", "gloo", mesh.choose_device().why)
    assert mesh.resolve_backend(ParallelConfig()) == "gloo"


@pytest.mark.parametrize("cuda,neuron,want", [
    (True, False, ("cuda", "nccl")),
    (False, True, ("neuron", "neuron")),
    (True, True, ("cuda", "nccl")),  # a GPU instance never has Neuron devices; CUDA wins if both answer
    (False, False, ("cpu", "gloo")),
])
def test_choice_follows_the_probes(monkeypatch, cuda, neuron, want):
    monkeypatch.setattr(mesh, "cuda_present", lambda: cuda)
    monkeypatch.setattr(mesh, "neuron_present", lambda: neuron)
    got = mesh.choose_device()
    assert (got.device, got.backend) == want and mesh.BACKEND_OF[got.device] == got.backend
    assert mesh.resolve_backend(ParallelConfig(backend="auto")) == want[1]
    assert mesh.resolve_backend(ParallelConfig(backend="gloo")) == "gloo"  # an explicit backend is kept


def test_neuron_probe_needs_both_the_package_and_a_neuron_accelerator(monkeypatch):
    # torch_neuronx importable (a stand-in module), but torch.accelerator reports no neuron device: not Neuron
    monkeypatch.setitem(sys.modules, "torch_neuronx", types.ModuleType("torch_neuronx"))
    assert mesh.neuron_present() is False
    fake = types.SimpleNamespace(is_available=lambda: True, current_accelerator=lambda: torch.device("cuda"))
    monkeypatch.setattr(torch, "accelerator", fake)
    assert mesh.neuron_present() is False  # an accelerator, but not a neuron one
    monkeypatch.setattr(torch, "accelerator", types.SimpleNamespace(
        is_available=lambda: True, current_accelerator=lambda: types.SimpleNamespace(type="neuron")))
    assert mesh.neuron_present() is True


def test_asking_for_neuron_without_a_device_says_what_to_do(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    with pytest.raises(PlanError, match="needs TorchNeuron"):
        mesh.init_distributed(ParallelConfig(backend="neuron"))
    with pytest.raises(PlanError, match="backend must be one of|backend"):
        ParallelConfig(backend="xla").check(1)


def test_neuron_trains_in_bf16_by_default():
    assert compute_dtype(ParallelConfig(), torch.device("cpu")) == torch.float32
    assert compute_dtype(ParallelConfig(), torch.device("meta")) == torch.float32
    neuron = types.SimpleNamespace(type="neuron")  # only .type is read
    assert compute_dtype(ParallelConfig(), neuron) == torch.bfloat16
    assert compute_dtype(ParallelConfig(mixed_precision="fp32"), neuron) == torch.float32
