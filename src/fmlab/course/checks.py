"""Each notebook's closing two-minute check: three questions whose answers the notebook computed, answers collapsed.

    from fmlab.course.checks import two_minute_check
    two_minute_check("12_capstone")       # the last cell but one of notebooks/12_capstone.ipynb

A question names the record that answers it (`fmlab.course.records.record`, a path into its value after `/`) and
a sentence with `{}` where the value goes. The answer is read from what this kernel recorded, so it is the figure
the learner's own run printed; where the section that computes it was skipped (a workshop path), the answer says
which record is missing. Every check is held to its notebook by tests/course/test_checks.py.
"""

from __future__ import annotations

from fmlab.course.records import lookup, recorded

CHECKS: dict[str, list[tuple[str, str, str]]] = {
    "00_setup": [
        ("Where do this machine's jobs run, locally or on SageMaker?", "backend", "on the `{}` backend"),
        ("How many parameters has the course's tiny model?", "tiny_params", "{:,}"),
        ("How long did importing the model library take here?", "import_seconds", "{} s, paid by every new process"),
    ],
    "01_when_to_pretrain": [
        ("How many days does the planner predict for the 30B run on 16 p4d?", "target_predicted/days",
         "{} days, at the MFU it predicts rather than a typed 40%"),
        ("At a typed 40% MFU, how many days would you have planned instead?", "target_days", "{} days"),
        ("Does plain DDP fit the 30B model on an A100?", "ddp_fits", "{}: each GPU would hold all 16 bytes per "
                                                                   "parameter"),
    ],
    "02_data_at_scale": [
        ("How many tokens per parameter did Llama 2 7B train on?", "tokens_per_param_llama2_7b",
         "{}, far past Chinchilla's 20"),
        ("How many bytes of text does one token of the course's tokenizer hold?", "bytes_per_token", "{}"),
        ("Do two workers of the share-nothing pipeline write identical shards from the same input?",
         "identical_across_workers", "{}"),
    ],
    "03_parallel_jobs_and_warm_pools": [
        ("How many jobs ran at once in the sweep?", "peak_concurrency", "{}, the slots the backend has"),
        ("Which learning rate won the sweep?", "best_lr", "{} (and whether the win is beyond the noise: see "
                                                          "the verdict)"),
        ("What does the warm pool cost while it waits?", "warm_pool_cost_usd", "${}"),
    ],
    "04_data_parallel": [
        ("How many GB does each GPU send in a ring all-reduce on 64 GPUs?", "ring_gb_64",
         "{} GB, about twice the gradients, whatever the GPU count"),
        ("And through a parameter server?", "ps_gb_64", "{} GB"),
        ("How far apart are DDP's gradients from the single-process ones?", "grad_max_abs_diff",
         "{:.1e} at most: float rounding, not a bug"),
    ],
    "05_sharded_data_parallel": [
        ("How many GB of training state does each GPU keep with full sharding (30B)?",
         "planned_state_gb/FSDP full", "{:.2f} GB"),
        ("And with DDP?", "planned_state_gb/DDP", "{:.0f} GB: every GPU holds all of it"),
        ("Did the measured shards match the planner?", "measured_matches_planner", "{}"),
    ],
    "06_tensor_parallel": [
        ("What is the smallest TP degree that keeps the global batch within its limit?", "smallest_tp", "{}"),
        ("How far apart are the TP and the single-process losses?", "tp_max_loss_diff", "{:.1e}"),
        ("Does SMP's layout fit on one node?", "smp_one_node_fits", "{}"),
    ],
    "07_gpt30b_sharded_training": [
        ("Which shard group does the planner choose for the 30B run?", "nb07.choice/shard degree",
         "hybrid sharding in groups of {} GPUs"),
        ("How many days does it predict?", "nb07.days", "{} days"),
        ("Did the gate pass the damaged checkpoint?", "nb07.damaged_gate/passed", "{}: a checkpoint that does not "
                                                                                 "reload stops the ladder"),
    ],
    "08_checkpointing_and_recovery": [
        ("How often should the 30B run checkpoint (Daly)?", "nb08.daly_hours", "every {} h"),
        ("From which step did the killed run resume?", "nb08.kill/resumed_from", "step {}"),
        ("How far apart are its losses from the uninterrupted run's?", "nb08.kill/max_loss_diff",
         "{}: equal to the last bit"),
    ],
    "08_retries_and_hangs": [
        ("How many attempts did the job with a lost instance take?", "nb08.retry/attempts",
         "{}: SageMaker retried it"),
        ("Which rank hung?", "nb08.hangs/hang/ranks/0", "rank {}"),
        ("How long did the hung job take to fail?", "nb08.hung/seconds", "{} s: the collective timeout, not for ever"),
    ],
    "09_trainium_continuous_pretraining": [
        ("What tensor-parallel degree was the tiny Llama converted to?", "nb09.tp",
         "TP {}, each rank's file holding its slice of every layer it owns"),
        ("How far apart are the weights after the round trip back to Hugging Face?", "nb09.roundtrip_max_abs_diff",
         "{}: exact"),
        ("What share of p4d's cost does trn1 save for the same tokens?", "nb09.trn1_savings_fraction",
         "{:.0%}"),
    ],
    "10_evaluate_export_and_serve": [
        ("What held-out perplexity did the trained model reach?", "nb10.heldout_perplexity",
         "{} (the untrained baseline: see the gate)"),
        ("Did the gate say go?", "nb10.gate/go", "{}"),
        ("How far apart are the exported model's logits from the trained one's?", "nb10.export_max_logit_diff",
         "{}"),
    ],
    "11_pretraining_on_aws_in_2026": [
        ("How many days does the 30B run on 16 p5 reserve?", "nb11.capacity_choice/reserved_days", "{} days"),
        ("How many steps apart does the cluster script checkpoint?", "nb11.cluster_checkpoint/every",
         "every {} steps: Daly's interval over the predicted step"),
        ("What happens to a static rendezvous after a node is replaced?", "nb11.static_rendezvous", "{}"),
    ],
    "12_capstone": [
        ("How many saves must the plan keep with an hourly gate?", "nb12.checkpoints/keep",
         "{}: one from before a spike must outlive the hour until it is noticed"),
        ("How many days does the reservation need when sized from P(miss)?", "nb12.sized/sized_days",
         "{} days, against the fixed rule's 15"),
        ("Which assumption moves P(miss) the most?", "nb12.sensitivity/0/assumption", "`{}`"),
    ],
}


def answers(stem: str, records: dict | None = None) -> list[tuple[str, str]]:
    """The notebook's questions and their answers from `records` (default: this kernel's)."""
    records = recorded() if records is None else records
    out = []
    for question, path, sentence in CHECKS[stem]:
        try:
            answer = sentence.format(lookup(records, path))
        except (KeyError, IndexError, TypeError):
            answer = f"not computed in this run: the section that records `{path.split('/')[0]}` was skipped"
        out.append((question, answer))
    return out


def markdown(stem: str, records: dict | None = None) -> str:
    lines = ["### Two-minute check", "", "Answer from what this notebook printed, then open the answer."]
    for i, (question, answer) in enumerate(answers(stem, records), 1):
        lines += ["", f"{i}. {question}", "", f"<details><summary>answer</summary>{answer}</details>"]
    return "\n".join(lines)


def two_minute_check(stem: str) -> None:
    """Show the notebook's three questions, each answer collapsed."""
    from IPython.display import Markdown, display

    display(Markdown(markdown(stem)))
