"""What a GPU and its links can really do: the constants of the step-time model (fmlab.plan.speed), as data.

    from fmlab.plan.hardware import GPUS, INTRA_NODE, network
    GPUS["A100-80GB"].matmul_tflops      # 267.9: the largest bf16 matmul measured, not the datasheet's 312
    INTRA_NODE["nvlink3"].busbw_gbs      # 230.8 GB/s: NCCL's all-reduce bus bandwidth inside one 8-GPU node
    network(400).achievable_gbs          # what 400 Gbit/s of EFA carries for NCCL: 41.8 GB/s of 50

One entry per GPU type and per link type, each with its source and the date it was read. None of them is fitted to
a published run: tests/plan/test_speed.py holds the model they feed against the runs in
tests/plan/published_runs.json, and the runs only check them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fmlab.plan.compute import PlanError

READ = "read 2026-11-27"
MAMF = ("Bekman, 'Machine Learning Engineering' (github.com/stas00/ml-engineering), compute/accelerator/README.md, "
        "'Maximum Achievable Matmul FLOPS comparison table': the fastest bf16 matmul a brute-force search of shapes "
        f"found ({READ})")
HBM = f"ml-engineering, 'Accelerator memory size and speed' table, and NVIDIA's datasheets ({READ})"
# FlashAttention-2: Dao 2023 (arXiv 2307.08691), abstract: "reaching 50-73% of the theoretical maximum FLOPs/s on
# A100"; its forward+backward runs below its forward, so the low end. On H100 FlashAttention-2's forward plateaus at
# 370 TFLOP/s (head dim 128, 8k tokens; the FlashAttention-3 paper's Figure, Shah et al. 2024, arXiv 2407.08608),
# cuDNN's and FlashAttention-3's at 600-650; training stacks of 2024 (PyTorch SDPA, torchtitan) ran FlashAttention-2.
FLASH = f"FlashAttention-2 (Dao 2023, arXiv 2307.08691) and FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608), {READ}"


@dataclass(frozen=True)
class Gpu:
    """One GPU type: its datasheet peak and what it really reaches on the three kinds of work in a training step."""

    name: str
    peak_tflops: float  # dense bf16 (fp16 on V100) datasheet peak: what MFU divides by
    matmul_tflops: float  # the largest matmul's measured rate (MAMF): linear layers run at this
    attention_tflops: float  # a fused attention kernel's rate, forward and backward, FLOPs counted causal
    hbm_gbs: float  # memory bandwidth, GB/s: element-wise work (norms, activations, the optimizer) runs at this
    rated_watts: float  # the board power the rates above were measured at
    intra_node: str  # the NVLink generation that joins the GPUs of one node
    source: str

    def rates(self, power_watts: float | None = None) -> tuple[float, float]:
        """(matmul, attention) TFLOP/s at `power_watts` (None: rated). A lower cap lowers the clock: dynamic power
        grows about as the cube of the clock (P ~ f V^2 with the voltage following the clock), so the rates scale
        with (cap / rated)^(1/3)."""
        scale = 1.0 if not power_watts else min(1.0, power_watts / self.rated_watts) ** (1 / 3)
        return self.matmul_tflops * scale, self.attention_tflops * scale


GPUS: dict[str, Gpu] = {g.name: g for g in [
    Gpu("V100-32GB", 125.0, 100.0, 60.0, 900.0, 300, "nvlink2",
        "NVIDIA V100 datasheet (125 TFLOP/s fp16 tensor, 900 GB/s HBM2); no MAMF row published for V100: its matmul "
        "rate is taken at 80% of peak, the H100's measured ratio, and its unfused attention at half the A100's "
        "share (an assumption: the course has no V100 run that depends on it)"),
    Gpu("A100-40GB", 312.0, 267.9, 0.60 * 312, 1555.0, 400, "nvlink3",
        f"{MAMF} (A100 SXM 267.9 of 312, CUDA 12.1); {FLASH}: 60% of peak, inside the paper's 50-73%; {HBM}: 1.555 TB/s"),
    Gpu("A100-80GB", 312.0, 267.9, 0.60 * 312, 2039.0, 400, "nvlink3",
        f"{MAMF} (A100 SXM 267.9 of 312); {FLASH}; {HBM}: 2.0 TB/s"),
    Gpu("H100-SXM", 989.0, 794.5, 370.0, 3350.0, 700, "nvlink4",
        f"{MAMF} (H100/H200 SXM 794.5 of 989; the course's own 8192^3 matmul on one H100, 793, agrees: "
        f"fmlab.plan.gpu_measurements.MATMUL_CEILING_MFU); {FLASH}: FlashAttention-2 at 370; {HBM}: 3.35 TB/s"),
    Gpu("H200", 989.0, 794.5, 370.0, 4800.0, 700, "nvlink4",
        f"{MAMF} (H100/H200 SXM 794.5); {FLASH}; {HBM}: 4.8 TB/s"),
    Gpu("B200", 2250.0, 1745.0, 0.5 * 2250, 8000.0, 1000, "nvlink5",
        f"{MAMF} (B200 bf16 1,745, 77.6% of 2,250; ml-engineering's H200-to-B200 guide); attention at half of peak "
        f"(an assumption: no FlashAttention-4 training figure was read); {HBM}: 8.0 TB/s"),
]}

# The catalog's accelerator names (fmlab.plan.catalog.Instance.accelerator) as speed-model GPU types.
ACCELERATOR_GPU = {"A100-40GB": "A100-40GB", "A100-80GB": "A100-80GB", "H100-80GB": "H100-SXM",
                   "H200-141GB": "H200", "B200-180GB": "B200"}


@dataclass(frozen=True)
class Link:
    """How fast NCCL moves data over one kind of link: its bus bandwidth for large messages and the latency it pays
    per ring step."""

    name: str
    busbw_gbs: float  # NCCL's bus bandwidth (nccl-tests' busbw), GB/s per GPU, large messages
    hop_latency_us: float  # NCCL's ring/Simple latency per hop over this kind of link
    source: str


# NCCL's own cost model (src/graph/tuning.cc, ring with the Simple protocol, the one large messages use): 8.4 us a
# collective, 3.4 us a hop over NVLink, 9.6 us a hop over the network.
NCCL_BASE_LATENCY_US = 8.4
NCCL_TUNING = f"NCCL src/graph/tuning.cc (baseLat ring/Simple 8.4 us; hwLat ring/Simple NVLink 3.4, NET 9.6), {READ}"

INTRA_NODE: dict[str, Link] = {link.name: link for link in [
    Link("nvlink2", 130.0, 3.4, f"V100 NVLink2 in a DGX-1-like hybrid cube mesh: an assumption, about 130 GB/s all-"
                                f"reduce busbw (no measurement read); {NCCL_TUNING}"),
    Link("nvlink3", 230.8, 3.4, f"NVIDIA/nccl issue #527 (2022-07-25): all_reduce_perf, 1 GiB, one p4d.24xlarge (8 "
                                f"A100): busbw 230.77 GB/s; {NCCL_TUNING}"),
    Link("nvlink4", 475.0, 3.4, f"NVIDIA/nccl-tests issue #272 (2024-11-27): all_reduce_perf on 8 H200 over NVLink4, "
                                f"NCCL 2.20.3: peak busbw 475 GB/s; {NCCL_TUNING}"),
    Link("nvlink5", 950.0, 3.4, f"NVLink5 doubles NVLink4's 900 GB/s per GPU (NVIDIA B200 datasheet: 1.8 TB/s): "
                                f"twice nvlink4's measured busbw, an assumption; {NCCL_TUNING}"),
]}


@dataclass(frozen=True)
class Network:
    """A node's inter-node network: its line rate and what NCCL gets of it."""

    gbps: float  # the node's total line rate, Gbit/s
    efficiency: float  # the share of it NCCL's collectives carry (measured)
    source: str

    @property
    def achievable_gbs(self) -> float:
        return self.gbps / 8 * self.efficiency

    hop_latency_us: float = 9.6


# Measured: aws-samples/awsome-distributed-training, micro-benchmarks/nccl-tests/README.md (read 2026-11-27):
# all_reduce_perf on two nodes, algbw at the largest message (a two-node tree all-reduce sends about the message
# out of each node, so algbw is the node's net rate): 2 x p4d.24xlarge, 2 GiB: 41.78 GB/s of 50 (0.84);
# 2 x p5.48xlarge, 16 GiB: 259.78 GB/s of 400 (0.65). Below 1,600 Gbit/s a node's NICs are nearer their line
# rate; at 3,200 Gbit/s (32 EFA interfaces, or 8 x 400 Gbit/s InfiniBand) the share falls.
NETWORK_EFFICIENCY = ((400.0, 41.78 / 50), (3200.0, 259.78 / 400))
NETWORK_SOURCE = ("aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md: two-node "
                  "all_reduce_perf algbw 41.78 GB/s on p4d (400 Gbit/s), 259.78 GB/s on p5 (3,200 Gbit/s); shares "
                  f"between the two interpolated on a log scale of the line rate; {READ}")


def network(gbps: float) -> Network:
    """The inter-node network of `gbps` Gbit/s per node, with the share NCCL carries (log-interpolated between the
    two measured line rates, held at their ends)."""
    if not (isinstance(gbps, int | float) and math.isfinite(gbps) and gbps > 0):
        raise PlanError(f"inter_node_gbps must be a positive number of Gbit/s per node (p4d: 400, p5: 3200), "
                        f"got {gbps!r}")
    (low, e_low), (high, e_high) = NETWORK_EFFICIENCY
    x = min(1.0, max(0.0, (math.log(gbps) - math.log(low)) / (math.log(high) - math.log(low))))
    return Network(gbps, e_low + x * (e_high - e_low), NETWORK_SOURCE)


def gpu(name: str) -> Gpu:
    """A GPU type by name, with the names it accepts in the error."""
    try:
        return GPUS[name]
    except KeyError:
        raise PlanError(f"unknown GPU {name!r}: the speed model knows {', '.join(GPUS)}") from None
