"""The failure zoo's data: the fixed lists of causes and fixes, and the quoted cases of lab 08b.

Each quoted case is a short excerpt from a public issue thread (quoted as its author posted it, trimmed to the
lines that matter, host names and long paths shortened with `...`), the thread's address, the date of the post,
and the cause and fix the thread's resolution (or the maintainers' answer) points to. Its `kind` says what the
excerpt is (`KINDS`): most are the failed job's own log lines; three threads give no log line, only the
reporter's words, and are quoted as prose; one log comes from a job unlike the case's (`context` says how).
Where the fix named is the course's and not the thread's, `thread_fix` says what the thread itself did.
`FIRST_MINUTE` says how to recognise the five most common in the first minute of reading a log; deck 08 shows
the same five.

    from fmlab.labs.zoo_cases import CAUSES, FIXES, QUOTED
    [c.id for c in QUOTED]

Read 2026-11-24 with the course's search tools (the `issues` corpus of public GitHub threads); q18, the kinds,
q01's context and q08's `thread_fix` 2026-11-26.
"""

from __future__ import annotations

from dataclasses import dataclass

READ = "2026-11-24"

# The fixed list a learner picks the cause from.
CAUSES = {
    "nccl_socket_fallback": "NCCL is not using EFA: it fell back to TCP sockets (plugin missing, or EFA not enabled)",
    "no_efa_device": "aws-ofi-nccl (the EFA plugin) was loaded on an instance or container without an EFA device",
    "hung_rank": "one rank never joined a collective (hung, frozen, deadlocked); the others waited out the timeout",
    "rank_alone": "one rank worked alone longer than the collective timeout (rank-0 evaluation or save, an uneven "
                  "last batch): nothing is broken, the others waited for it in their next collective",
    "dead_rank": "a peer process died (killed, crashed, its node lost) while the others were in a collective",
    "host_oom_save": "host (CPU) memory ran out while one rank gathered the full model state to save it",
    "gpu_oom_save": "GPU memory ran out while gathering the full (unsharded) parameters to save them",
    "quota": "the account's service quota for that instance type (training job usage) is too low",
    "capacity": "AWS has no free capacity of that instance type in that Region/Availability Zone right now",
    "image_too_old": "the container's PyTorch (or another library) is older than the API the script imports",
    "diverged": "the training diverged numerically (fp16 overflow, too high a learning rate, a bad batch)",
    "layout_mismatch": "a checkpoint saved for one world size or sharding is loaded into another without resharding",
    "s3_throttle": "too many requests per second to one S3 prefix: S3 asks the client to slow down",
    "disk_full": "the disk the checkpoint is written to is full",
    "damaged_checkpoint": "the newest checkpoint is incomplete or damaged (a partial write or a cut copy)",
    "invalid_request": "the job request breaks a SageMaker rule and is refused before any instance starts",
}

# The fixed list a learner picks the fix from.
FIXES = {
    "efa_env": "run on an EFA instance with an image that has aws-ofi-nccl; from aws-ofi-nccl 1.7.0 it needs no "
               "variable, an older one FI_PROVIDER=efa (and FI_EFA_USE_DEVICE_RDMA=1 on p4d/p5); check that "
               "NCCL_DEBUG=INFO shows NET/OFI or Libfabric",
    "efa_instance": "use an EFA-enabled instance type (p4d, p5, trn1) for multi-node training; on one node without "
                    "EFA the plugin's warning is not the failure: look further down the log",
    "find_straggler": "find the rank that never arrived (0% GPU, its last log line, py-spy dump), replace its node and "
                      "restart from the newest complete checkpoint; keep a collective timeout so a hang fails fast",
    # torch 2.13's docstrings: DistributedSampler with drop_last=False (the default) 'will add extra indices to
    # make the data evenly divisible' (torch/utils/data/distributed.py); DistributedDataParallel.join() is a
    # 'Context manager for training with uneven inputs across processes in DDP' (torch/nn/parallel/
    # distributed.py); init_process_group's timeout applies to the group's collectives.
    # notebooks/08_retries_and_hangs.ipynb section 3: a rank may legitimately work alone for minutes.
    "share_or_wait_longer": "spread the lone work over every rank (each evaluates or saves its own shard), give "
                            "every rank the same number of batches (DistributedSampler pads by default; DDP's "
                            "join() for uneven inputs), or give that phase a longer timeout (init_process_group("
                            "timeout=...)); no node is at fault, so replacing one does not help",
    "restart_from_checkpoint": "read the first failing rank's own log for the real error, replace the node if it is "
                               "the hardware, and let the job restart from its newest complete checkpoint",
    "sharded_save": "save sharded (torch.distributed.checkpoint: every rank writes its own shards) and consolidate "
                    "offline on a machine with the memory; never gather the full state on one rank during training",
    "quota_increase": "request a Service Quotas increase for '<instance type> for training job usage' in that "
                      "Region, or use a type you already have quota for",
    "capacity_plan": "retry later, fall back to another instance type or Region, or reserve the capacity ahead "
                     "(a SageMaker training plan)",
    "newer_image": "use an image whose PyTorch has the API (check the script's imports against the image before "
                   "launching: `fmlab preflight`), or write the script for the image's version",
    "rewind": "restart from the last good checkpoint with bf16 instead of fp16, a lower learning rate or gradient "
              "clipping, and skip the batches that blew up",
    "reshard_load": "save and load with torch.distributed.checkpoint, which reshards to any world size, or convert "
                    "the checkpoint offline to the new layout",
    "spread_s3": "spread the objects over more prefixes, retry with exponential back-off, read through FastFile "
                 "or FSx for Lustre instead of many small GETs",
    "bigger_disk": "size the volume (VolumeSizeInGB) for the kept checkpoints, keep only the last N, write to "
                   "/opt/ml/checkpoints (synced to S3) rather than the root disk",
    "fallback_checkpoint": "resume from the newest checkpoint that checks out (marker present, every file its size); "
                           "set the damaged one aside and restore it from S3 if it is needed",
    "fix_request": "change the request field the error names to within the limit; nothing ran, nothing was billed",
}


# What a case's excerpt is.
KINDS = {
    "log": "the failed job's own log lines",
    "prose": "the reporter's words: the thread quotes no log line for it",
    "log, another job": "real log lines, from a job unlike the case's (its context says how)",
}


@dataclass(frozen=True)
class QuotedCase:
    """A real failure, as its log shows it, with where it was reported and the diagnosis the thread reached."""

    id: str
    title: str
    excerpt: str
    source: str  # the public thread (URL)
    posted: str  # the date of the quoted post
    cause: str
    fixes: tuple[str, ...]  # the fixes accepted (the first is the one the lab names)
    context: str = ""  # what the job was, when the excerpt alone does not say
    kind: str = "log"  # a key of KINDS
    thread_fix: str = ""  # what the thread itself did, where the fix named is the course's
    read: str = READ  # when the thread was read


QUOTED = [
    QuotedCase(
        "q01_no_plugin", "NCCL picks its network on a multi-node job",
        "NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation\n"
        "NCCL INFO NET/IB : No device found.\n"
        "NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>\n"
        "NCCL INFO Using network Socket",
        "https://github.com/NVIDIA/nccl/issues/1126", "2023-12-26", "nccl_socket_fallback", ("efa_env",),
        context="The thread's job ran on one machine with 2 GPUs and stuck; there these lines are harmless "
                "(NCCL's maintainers in NVIDIA/nccl#1231, 2024-03-18: the plugin line 'is harmless'), because "
                "GPUs of one machine talk without the network. The case asks what the same lines say where NCCL "
                "must cross nodes, a multi-node p4d job, whose healthy lines are 'NET/OFI Using aws-ofi-nccl' "
                "and 'Using network AWS Libfabric'.",
        kind="log, another job"),
    QuotedCase(
        "q02_ofi_only_efa", "A SageMaker job on ml.p3.16xlarge with the PyTorch training image",
        "algo-1:249:249 [0] ofi_init:1288 NCCL WARN NET/OFI Only EFA provider is supported\n"
        "algo-1:249:249 [0] ofi_init:1339 NCCL WARN NET/OFI aws-ofi-nccl initialization failed",
        "https://github.com/aws/deep-learning-containers/issues/2675", "2023-02-07", "no_efa_device",
        ("efa_instance",), context="ml.p3.16xlarge has no EFA; the job then seemed to hang."),
    QuotedCase(
        "q03_p5e_no_efa_env", "Multi-node jobs on ml.p5e.48xlarge through the SageMaker training toolkit",
        "ml.p5e.48xlarge is missing from SM_EFA_NCCL_INSTANCES ... EFA is not enabled, causing NCCL to fall back to "
        "TCP sockets ... intermittent hangs during ncclCommInitRankConfig ... No error messages are produced - "
        "jobs simply hang indefinitely",
        "https://github.com/aws/sagemaker-training-toolkit/issues/240", "2026-01-16", "nccl_socket_fallback",
        ("efa_env",), context="The toolkit sets FI_PROVIDER=efa only for the instance types on its list.",
        kind="prose"),
    QuotedCase(
        "q04_watchdog_timeout", "A collective that never completes",
        "[rank1]:[E626 06:24:44] ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for "
        "600020 milliseconds before timing out.\n"
        "[PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at "
        "work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.",
        "https://github.com/XPixelGroup/BasicSR/issues/737", "2025-06-26", "hung_rank", ("find_straggler",)),
    QuotedCase(
        "q05_timeout_hours_in", "Six hours into a run, every rank reports the same sequence number",
        "Epoch 0:   6%| 32040/500150 [6:28:43<94:39:17, 1.37it/s, loss=2.6 ...]\n"
        "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, "
        "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.",
        "https://github.com/pytorch/pytorch/issues/118369", "2024-02-17", "hung_rank", ("find_straggler",)),
    QuotedCase(
        "q06_remote_error", "DDP on a cluster, mid-training",
        "torch.distributed.DistBackendError: NCCL error in: .../NCCLUtils.hpp:268, remote process exited or there "
        "was a network error, NCCL version 2.21.5\n"
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
        "Last error:\nsocketProgressOpt: Call to recv from 172....<33759> failed : Connection reset by peer",
        "https://github.com/NVIDIA/nccl/issues/2076", "2026-03-29", "dead_rank", ("restart_from_checkpoint",)),
    QuotedCase(
        "q07_broken_pipe", "Two p4d nodes; a segmentation fault on one rank just before",
        "misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe\n"
        "proxy.cc:1119 NCCL WARN [Proxy Service 9] Failed to execute operation Connect from rank 9, retcode 6\n"
        "misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer a100-st-p4d24xlarge-22...<47861>",
        "https://github.com/NVIDIA/nccl/issues/795", "2023-03-02", "dead_rank", ("restart_from_checkpoint",)),
    QuotedCase(
        "q08_sigkill_on_save", "DeepSpeed ZeRO-3 training that dies exactly at its save steps",
        "SIGKILL on save steps\n... it's due to system memory running out (and then when it tries to save, it "
        "crashes)",
        "https://github.com/huggingface/accelerate/issues/2722", "2024-04-30", "host_oom_save", ("sharded_save",),
        context="torchrun reports the worker as 'exitcode: -9 ... Signal 9 (SIGKILL)': the kernel's OOM killer.",
        kind="prose",
        thread_fix="the reporter got out by 'setting `zero3_init_flag` to `false`' (no DeepSpeed zero.Init), "
                   "which 'frees up just enough RAM to be able to save the model?' (2024-04-30); the course's "
                   "fix removes the gather of the full state on one host instead of making room for it"),
    QuotedCase(
        "q09_cuda_oom_gather", "FSDP fine-tuning on A100 40 GB: training finishes, then the save",
        "fully_sharded_data_parallel.py:2224: UserWarning: Failed to clone() tensor with name lm_head.weight. ... "
        "Error: CUDA out of memory. Tried to allocate 502.00 MiB (GPU 1; 39.59 GiB total capacity; 35.54 GiB "
        "already allocated; 276.19 MiB free; 37.22 GiB reserved in total by PyTorch)",
        "https://github.com/tatsu-lab/stanford_alpaca/issues/65", "2023-03-16", "gpu_oom_save", ("sharded_save",)),
    QuotedCase(
        "q10_resource_limit", "The first CreateTrainingJob in a new account",
        "ResourceLimitExceeded: An error occurred (ResourceLimitExceeded) when calling the CreateTrainingJob "
        "operation: The account-level service limit 'ml.p3.2xlarge for training job usage' is 0 Instances, with "
        "current utilization of 0 Instances and a request delta of 1 Instances. Please contact AWS support to "
        "request an increase for this limit.",
        "https://github.com/gabehollombe-aws/jupyter-notebooks/issues/1", "2020-02-03", "quota",
        ("quota_increase",)),
    QuotedCase(
        "q11_capacity", "A training job that fails while starting",
        'FailureReason: "CapacityError: Unable to provision requested ML compute capacity. Please retry using a '
        'different ML instance type."',
        "https://github.com/DIAGNijmegen/rse-grand-challenge/issues/2631", "2022-08-08", "capacity",
        ("capacity_plan",)),
    QuotedCase(
        "q12_import_fully_shard", "An FSDP2 script in an environment with PyTorch older than 2.6",
        "ImportError: cannot import name 'fully_shard' from 'torch.distributed.fsdp'",
        "https://github.com/EleutherAI/bergson/issues/257", "2026-04-30", "image_too_old", ("newer_image",),
        context="fully_shard is public in torch.distributed.fsdp from PyTorch 2.6 (pytorch/pytorch PR #141868; "
                "fmlab.service.features, 'fsdp2')."),
    QuotedCase(
        "q13_import_dtensor", "Current transformers in an image that pins PyTorch 2.4.0",
        "ImportError: cannot import name 'DTensor' from 'torch.distributed.tensor'",
        "https://github.com/huggingface/transformers/issues/47479", "2026-07-22", "image_too_old", ("newer_image",)),
    QuotedCase(
        "q14_loss_nan", "nanoGPT on 4 x V100 with dtype float16",
        "I got the nan issue (as #136), even reducing learning rate to `1e-5`, after ~6000 iters. I'm not sure if "
        "this is caused by the dtype `float16` I used\n...\nI've tried `float32` and there is no nan issue.",
        "https://github.com/karpathy/nanoGPT/issues/167", "2023-02-20", "diverged", ("rewind",), kind="prose"),
    QuotedCase(
        "q15_size_mismatch", "A full state dict loaded into an FSDP2 + TP model on a (2, 4) mesh",
        "Error(s) in loading state_dict for Linear:\n\tsize mismatch for weight: copying a param with shape "
        "torch.Size([2, 17]) from checkpoint, the shape in current model is torch.Size([1, 17]).",
        "https://github.com/pytorch/pytorch/issues/136228", "2024-09-17", "layout_mismatch", ("reshard_load",)),
    QuotedCase(
        "q16_s3_slowdown", "Many workers reading Common Crawl from S3 at once",
        "{'Error': {'Code': 'SlowDown', 'Message': 'Please reduce your request rate.'}}",
        "https://github.com/huggingface/datatrove/issues/302", "2024-11-12", "s3_throttle", ("spread_s3",)),
    QuotedCase(
        "q17_no_space", "A 3B model training on p3.16xlarge, at epoch 0.3",
        'File ".../torch/serialization.py", line 604, in _save\n'
        "    zip_file.write_record(name, storage.data_ptr(), num_bytes)\n"
        "OSError: [Errno 28] No space left on device",
        "https://github.com/databrickslabs/dolly/issues/139", "2023-04-29", "disk_full", ("bigger_disk",)),
    QuotedCase(
        "q18_eval_on_one_gpu", "Multi-GPU training, evaluation on a single GPU",
        "[E ProcessGroupNCCL.cpp:587] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL("
        "OpType=BROADCAST, Timeout(ms)=1800000) ran for 1802157 milliseconds before timing out.",
        "https://github.com/huggingface/accelerate/issues/223", "2021-12-31", "rank_alone",
        ("share_or_wait_longer",),
        context="The reporter: 'we run into a timeout when we evaluate for more than 30 minutes on a single GPU'; "
                "the job's collective timeout was 30 minutes (Timeout(ms)=1800000).", read="2026-11-26"),
]

# How to recognise the five most common in the first minute (deck 08 shows the same five).
FIRST_MINUTE = [
    ("hung_rank", "Watchdog caught collective operation timeout ... ran for 600000+ ms",
     "every rank reports the same SeqNum; one node sits at 0% GPU; its last log line is older than the others'; "
     "if that rank was busy alone (rank-0 evaluation or save, an uneven last batch) nothing hung: the timeout "
     "was shorter than its work"),
    ("dead_rank", "remote process exited or there was a network error / gloo: Connection reset (or closed) by peer",
     "one rank's log ends early with its own error or nothing (exitcode -9 = SIGKILL); read that log first"),
    ("nccl_socket_fallback", "NCCL_DEBUG=INFO: 'Using network Socket', 'No plugin found (libnccl-net.so)'",
     "grep the first minute of the log for 'NET/OFI' or 'Libfabric': absent on an EFA instance = no EFA"),
    ("host_oom_save", "exitcode -9 (SIGKILL) at the first checkpoint step, nothing in the traceback",
     "it dies at step N x checkpoint-every, never between; the host's memory graph climbs just before"),
    ("quota", "ResourceLimitExceeded ... account-level service limit '<type> for training job usage'",
     "the job never starts: CreateTrainingJob itself fails (CapacityError instead = AWS, not your account)"),
]


def quoted(case_id: str) -> QuotedCase:
    """The quoted case with this id; a clear error names the ids."""
    for case in QUOTED:
        if case.id == case_id:
            return case
    raise KeyError(f"no quoted case {case_id!r}; the cases are {', '.join(c.id for c in QUOTED)}")
