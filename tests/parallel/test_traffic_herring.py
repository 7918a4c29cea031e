"""Herring (SMDDP's AllReduce) traffic against a ring all-reduce: fmlab.plan.traffic.herring_bytes.

    .venv/bin/pytest tests/parallel/test_traffic_herring.py -q     (arithmetic only: well under a second)

What the sources say, and what each test checks (read 2026-11-23):
- SageMaker developer guide, SMDDP introduction ("Optimal bandwidth use with balanced fusion buffer"): the buffer
  is sharded into N parts, part i to server i, and "each server receives exactly the same number of bytes".
- SMDDP FAQ: the servers use "the CPUs available with GPU instances"; no extra instances are launched.
- Fairring's README (facebookresearch/fairring) on Herring: a constant number of network hops, and constant bytes
  per GPU as machines are added.
- Herring's abstract (SC20): gradient reduction "twice as fast as all-reduce-based methods": the bytes-only
  reading of it holds when the servers have their own links (separate machines), tested as a limit below.
"""

import pytest

from fmlab.plan import traffic

S = 13.5e9  # a buffer of 13.5 GB: llama2-7b's 6.74B bf16 gradients, rounded


def test_every_server_shard_carries_the_same_bytes():
    for instances, servers in ((8, 8), (8, 16), (16, 64)):
        h = traffic.herring_bytes(S / 2, 2, instances, servers)
        assert h.server_bytes == pytest.approx(instances * S / servers)  # its 1/N slice from every instance
        assert h.servers * h.server_bytes == pytest.approx(instances * S)  # all the instances' buffers, once
    assert traffic.herring_bytes(S / 2, 2, 8).servers == 8  # default: one shard per instance


def test_each_instance_sends_its_buffer_once_and_gets_it_back_once():
    h = traffic.herring_bytes(S / 2, 2, 8)
    assert (h.buffer_bytes, h.worker_sent, h.worker_received) == (S, S, S)
    assert h.hops == 2


def test_shards_on_the_instances_cost_as_many_bytes_as_a_ring_among_them():
    for instances in (1, 2, 4, 8, 16, 64):
        h = traffic.herring_bytes(S / 2, 2, instances)
        ring = traffic.ring_allreduce_bytes(S / 2, 2, instances)  # 2(I-1)/I x S
        assert h.network_sent == pytest.approx(ring) and h.network_received == pytest.approx(ring)
    assert traffic.herring_bytes(S / 2, 2, 1).network_sent == 0  # one instance: nothing crosses the network


def test_servers_on_separate_machines_halve_the_bytes_the_gpus_send():
    for workers, instances in ((64, 8), (2048, 256)):  # 2,048 V100s: the largest cluster of the paper's abstract
        apart = traffic.herring_bytes(S / 2, 2, instances, colocated=False)
        assert apart.network_sent == S
        ratio = traffic.ring_allreduce_bytes(S / 2, 2, workers) / apart.network_sent
        assert ratio == pytest.approx(2 * (workers - 1) / workers)
    assert ratio == pytest.approx(2.0, abs=1e-3)  # the abstract's "twice as fast", read as bytes alone


def test_two_hops_against_the_rings_sequential_steps():
    assert traffic.ring_allreduce_steps(64) == 126
    assert traffic.ring_allreduce_steps(1) == 0
    assert traffic.herring_bytes(S / 2, 2, 256).hops == 2


def test_bad_input_says_what_to_change():
    with pytest.raises(ValueError, match="multiple of instances"):
        traffic.herring_bytes(S / 2, 2, 8, servers=12)
    with pytest.raises(ValueError, match="instances must be at least 1"):
        traffic.herring_bytes(S / 2, 2, 0)
    with pytest.raises(ValueError, match="servers must be at least 1"):
        traffic.herring_bytes(S / 2, 2, 8, servers=0, colocated=False)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        traffic.ring_allreduce_steps(0)
    assert traffic.herring_bytes(S / 2, 2, 8, servers=12, colocated=False).server_bytes == pytest.approx(8 * S / 12)


def test_the_papers_claims_are_quoted_with_their_source():
    assert traffic.CLAIMS["herring_reduction_speedup"].value == 2.0
    assert traffic.CLAIMS["herring_scaling_efficiency"].value == 0.85
    assert all("SC20" in traffic.CLAIMS[k].source or "abstract" in traffic.CLAIMS[k].source
               for k in ("herring_reduction_speedup", "herring_scaling_efficiency"))
    designs = [row[0] for row in traffic.HISTORY]
    assert designs[0] == "parameter server" and designs[-1].startswith("Herring")
