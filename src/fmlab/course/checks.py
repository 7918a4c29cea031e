"""Each notebook's closing two-minute check: figures the notebook computed, and one question of why or what if.

    from fmlab.course.checks import two_minute_check, answer
    two_minute_check("12_capstone")           # the last cell but one of notebooks/12_capstone.ipynb
    answer("12_capstone", 3, "a")             # the learner's choice for question 3, checked, with the reason

A figure question names the record that answers it (`fmlab.course.records.record`, a path into its value after `/`)
and a sentence with `{}` where the value goes; the answer is what this kernel recorded. Every record a check reads
comes from a section of the one-day path (or, for a notebook only the two-day path takes, of the two-day path), so
a room on either path sees every answer. A `Why` question offers choices and says which holds and why, from the
notebook's own reasoning; where the notebook computed what the answer rests on, `holds(records)` re-checks it (the
suite runs it on the notebook's records). Every check is held to its notebook by tests/course/test_checks.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fmlab.course.records import lookup, recorded


@dataclass(frozen=True)
class Why:
    question: str
    choices: tuple[str, ...]
    right: int  # index into choices
    because: str
    holds: Callable[[dict], bool] | None = None  # re-checks, on the notebook's records, what the answer rests on


def _ring_flat(_: dict) -> bool:
    from fmlab.plan import traffic

    return traffic.ring_allreduce_bytes(1e9, 2, 64) / traffic.ring_allreduce_bytes(1e9, 2, 8) < 1.15


CHECKS: dict[str, list] = {
    "00_setup": [
        ("Where do this machine's jobs run, locally or on SageMaker?", "backend", "on the `{}` backend"),
        ("How many parameters has the course's tiny model?", "tiny_params", "{:,}"),
        Why("In a SageMaker Studio space with an execution role, why do the course's jobs still run locally unless "
            "FMLAB_BACKEND says sagemaker?",
            ("A role that can launch jobs is not a decision to spend money: the instructor chooses the backend",
             "Studio cannot start training jobs", "Local jobs are faster than SageMaker's"),
            0, "credentials say what a notebook *may* launch, not what the room agreed to pay for; `FMLAB_BACKEND` "
               "(set by the space's start-up script) is that decision, and the first job prints the one it took"),
    ],
    "01_when_to_pretrain": [
        ("How many days does the planner predict for the 30B run on 16 p4d?", "target_predicted/days",
         "{} days, at the MFU it predicts rather than a typed 40%"),
        ("At a typed 40% MFU, how many days would you have planned instead?", "target_days", "{} days"),
        Why("Why does the planner's MFU for this run differ from a typed 40%?",
            ("It predicts the step from this layout's compute, recomputation, exposed communication and optimizer",
             "40% is the A100's peak", "MFU does not depend on the layout"),
            0, "MFU is an outcome of the run, not an input: the same model on another layout or micro-batch runs "
               "at another MFU, and the planner adds up where this layout's step goes",
            lambda r: abs(lookup(r, "target_predicted/days") - r["target_days"]) > 0.05 * r["target_days"]),
    ],
    "02_data_at_scale": [
        ("How many bytes of text does one token of the course's tokenizer hold?", "bytes_per_token", "{}"),
        ("How many tokens per parameter did Llama 2 7B train on?", "tokens_per_param_llama2_7b",
         "{}, far past Chinchilla's 20"),
        Why("Why can the workers of the share-nothing pipeline run without talking to each other?",
            ("Each worker's input files and output shards are fixed by its index, so nothing it writes depends on "
             "another worker", "They share one tokenizer process", "A coordinator hands out lines one at a time"),
            0, "the work is split by file before it starts; a worker that fails is rerun alone and writes the same "
               "shards, which is why the pipeline scales to thousands of workers"),
    ],
    "03_parallel_jobs_and_warm_pools": [
        ("How many jobs ran at once in the sweep?", "peak_concurrency", "{}, the slots the backend has"),
        ("What does the warm pool cost while it waits?", "warm_pool_cost_usd", "${}"),
        Why("What decides whether the sweep names a winning learning rate?",
            ("The gap between the best two mean losses, against the seed-to-seed noise",
             "The lowest single loss of any job", "The job that finished first"),
            0, "a gap smaller than the noise between seeds is not evidence: the verdict is 'inconclusive' exactly "
               "when the gap is inside the margin",
            lambda r: (r["lr_verdict"] == "inconclusive") == (r["lr_gap"] <= r["lr_margin"])),
    ],
    "04_data_parallel": [
        ("How far apart are the 1- and 2-process losses?", "max_loss_diff", "{:.1e} at most"),
        ("How far apart are DDP's gradients from the single-process ones?", "grad_max_abs_diff",
         "{:.1e} at most: float rounding, not a bug"),
        Why("What if the cluster grows from 8 to 64 GPUs: what happens to the bytes each GPU sends in a ring "
            "all-reduce of the same gradients?",
            ("About the same: 2(W-1)/W times the gradients, close to twice them for any W", "Eight times more",
             "Eight times fewer"),
            0, "each GPU sends its share to its neighbour 2(W-1) times, and each share is 1/W of the gradients; "
               "what grows with W is the number of steps, so latency, not bandwidth, limits a large ring",
            _ring_flat),
    ],
    "05_sharded_data_parallel": [
        ("How many GB of training state does each GPU keep with full sharding (30B)?",
         "planned_state_gb/FSDP full", "{:.2f} GB"),
        ("And with DDP?", "planned_state_gb/DDP", "{:.0f} GB: every GPU holds all of it"),
        Why("Why does ZeRO-1 still keep about 123 GB per GPU for the 30B model on 128 GPUs?",
            ("It shards only the optimizer's states: every GPU keeps all the bf16 weights and gradients",
             "It shards nothing", "It keeps the activations of every layer"),
            0, "ZeRO-1 divides the 12 bytes of fp32 optimizer state per parameter by the GPU count and keeps 4 bytes "
               "of weights and gradients whole; ZeRO-2 shards the gradients too, full sharding everything",
            lambda r: lookup(r, "planned_state_gb/ZeRO-1") > 10 * lookup(r, "planned_state_gb/FSDP full")),
    ],
    "06_tensor_parallel": [
        ("How far apart is one layer split two ways from the whole layer, in one process?", "one_process_split_diff",
         "{:.1e}: float rounding"),
        ("And across the TP ranks of the MLP, outputs and gradients together?", "mlp_max_diff", "{:.1e} at most"),
        Why("Why does tensor parallelism let the cluster grow without growing the global batch?",
            ("TP ranks work on the same sequences, so only the data-parallel degree multiplies the batch",
             "TP shrinks the sequence length", "TP skips the gradient all-reduce"),
            0, "the global batch is micro-batch x accumulation x data-parallel degree; GPUs added as TP ranks split "
               "each layer's matrices and leave the data-parallel degree, and so the batch, as it was"),
    ],
    "07_gpt30b_sharded_training": [
        ("Which shard group does the planner choose for the 30B run?", "nb07.choice/shard degree",
         "hybrid sharding in groups of {} GPUs"),
        ("How many days does it predict?", "nb07.days", "{} days"),
        Why("Why does the planner choose that layout rather than full sharding over every GPU?",
            ("It is the fastest predicted step among the layouts that fit with the planner's headroom",
             "SMP v2 accepts only that group size", "Smaller groups always use less memory"),
            0, "the rule is 'the fastest step that fits': a smaller group keeps more of each all-gather inside fewer "
               "nodes, as long as the group still holds the training state",
            lambda r: lookup(r, "nb07.choice_gb") < 40),
    ],
    "08_checkpointing_and_recovery": [
        ("From which step did the killed run resume?", "nb08.kill/resumed_from", "step {}"),
        ("How far apart are its losses from the uninterrupted run's?", "nb08.kill/max_loss_diff",
         "{}: equal to the last bit"),
        Why("Why does the resumed run match the uninterrupted one to the last bit, not just closely?",
            ("The checkpoint restores the weights, optimizer, LR schedule, data position and RNG state",
             "The seed is fixed, so any restart repeats the same losses", "The killed rank's steps are not logged"),
            0, "leave out any one of them (the sampler's position, say) and the resumed run sees other batches: "
               "close, but not equal",
            lambda r: lookup(r, "nb08.kill/max_loss_diff") == 0),
    ],
    "08_retries_and_hangs": [
        ("How many attempts did the job with a lost instance take?", "nb08.retry/attempts",
         "{}: SageMaker retried it"),
        ("How long did the hung job take to fail?", "nb08.hung/seconds", "{} s: the collective timeout, not for ever"),
        Why("What if the collective timeout were the default 30 minutes instead of seconds?",
            ("A hung rank would hold every GPU of the job idle for 30 minutes before anything restarts",
             "The job would never fail", "NCCL would skip the hung rank"),
            0, "a hang fails nothing by itself: the other ranks wait in the collective until the timeout ends it, "
               "and the whole cluster bills for that wait"),
    ],
    "09_trainium_continuous_pretraining": [
        ("What tensor-parallel degree was the tiny Llama converted to?", "nb09.tp",
         "TP {}, each rank's file holding its slice of every layer it owns"),
        ("From which Neuron release is NxD Training out of support?", "nb09.nxd_end_of_support_as_of",
         "Neuron {}"),
        Why("Why must the Hugging Face checkpoint be cut into files per (tp, pp) rank before NxD can train it?",
            ("NxD builds every layer already split, and each rank loads only its own state dict",
             "Neuron cannot read safetensors", "The files must be smaller than 2 GB"),
            0, "with TP each rank holds a slice of each weight and with PP a block of layers; the conversion writes "
               "exactly what each rank builds",
            lambda r: r["nb09.files_written"] >= r["nb09.tp"] * r["nb09.pp"]),
    ],
    "10_evaluate_export_and_serve": [
        ("What held-out perplexity did the trained model reach?", "nb10.heldout_perplexity",
         "{} (the untrained baseline: see the gate)"),
        ("Did the gate say go?", "nb10.gate/go", "{}"),
        Why("Why does the gate read held-out loss rather than the training loss?",
            ("Training loss also falls when a model memorises its data; held-out text shows what generalises",
             "Held-out loss is cheaper to compute", "Training loss is not logged"),
            0, "the held-out units were never trained on, so their loss is the one that predicts the next phase; "
               "the cloze items are checked for overlap with the training data for the same reason"),
    ],
    "11_pretraining_on_aws_in_2026": [
        ("How many days does the 30B run on 16 p5 reserve?", "nb11.capacity_choice/reserved_days", "{} days"),
        ("How many steps apart does the cluster script checkpoint?", "nb11.cluster_checkpoint/every",
         "every {} steps: Daly's interval over the predicted step"),
        Why("Why does torchrun's default rendezvous work on one node and fail on two?",
            ("Its static rendezvous on localhost makes every node's torchrun host the store as node 0",
             "Slurm forbids it", "gloo needs a GPU"),
            0, "with `--rdzv-backend c10d --rdzv-endpoint $HEAD_NODE:PORT` every node meets one store on the first "
               "node; without it each waits for peers at its own address"),
    ],
    "12_capstone": [
        ("How many saves must the plan keep with an hourly gate?", "nb12.checkpoints/keep",
         "{}: one from before a spike must outlive the hour until it is noticed"),
        ("Which assumption moves P(miss) the most?", "nb12.sensitivity/0/assumption", "`{}`"),
        Why("What if the loss alert fired after four hours instead of one: what happens to the saves to keep?",
            ("More: a save from before the spike must still exist when the spike is noticed",
             "Fewer: the alert catches more", "No change: keep-last-N does not depend on the alert"),
            0, "keep-last-N deletes the oldest save once a newer one is complete; the saves made during the hours "
               "before the alert are all after the spike, so N must cover that window",
            lambda r: lookup(r, "nb12.checkpoints/keep") >= 2),
    ],
}


LETTERS = "abcdefgh"


def answers(stem: str, records: dict | None = None) -> list[tuple[str, str]]:
    """The notebook's questions (a Why's with its lettered choices) and their answers from `records` (default: this
    kernel's)."""
    records = recorded() if records is None else records
    out = []
    for item in CHECKS[stem]:
        if isinstance(item, Why):
            options = " ".join(f"({LETTERS[i]}) {c}." for i, c in enumerate(item.choices))
            out.append((f"{item.question} {options}", f"({LETTERS[item.right]}): {item.because}."))
            continue
        question, path, sentence = item
        try:
            answer = sentence.format(lookup(records, path))
        except (KeyError, IndexError, TypeError):
            answer = f"not computed in this run: the section that records `{path.split('/')[0]}` was skipped"
        out.append((question, answer))
    return out


def markdown(stem: str, records: dict | None = None) -> str:
    lines = ["### Two-minute check", "", "Answer from what this notebook printed and why, then open the answer, or "
             f"check your choice in a cell: `from fmlab.course.checks import answer; answer({stem!r}, 3, \"b\")`."]
    for i, (question, answer) in enumerate(answers(stem, records), 1):
        lines += ["", f"{i}. {question}", "", f"<details><summary>answer</summary>{answer}</details>"]
    return "\n".join(lines)


def answer(stem: str, number: int, choice: str) -> str:
    """Check the learner's `choice` (a letter) for question `number` (1-based) of `stem`'s check; prints and returns
    the verdict with the reason. A clear error for a question that offers no choices or a letter it does not."""
    items = CHECKS[stem]
    if not 1 <= number <= len(items) or not isinstance(items[number - 1], Why):
        whys = [i + 1 for i, item in enumerate(items) if isinstance(item, Why)]
        raise ValueError(f"question {number} of {stem} offers no choices; the ones that do: {whys}")
    item = items[number - 1]
    letter = choice.strip().lower().strip("()")
    if len(letter) != 1 or letter not in LETTERS[:len(item.choices)]:
        raise ValueError(f"choose one of {', '.join(LETTERS[:len(item.choices)])}, not {choice!r}")
    right = LETTERS[item.right]
    verdict = (f"right: {item.because}." if letter == right else
               f"not quite: ({letter}) {item.choices[LETTERS.index(letter)]}. The answer is ({right}): {item.because}.")
    print(verdict)
    return verdict


def records_read(stem: str) -> set[str]:
    """The records (their names, before any `/`) `stem`'s figure questions read."""
    return {item[1].split("/")[0] for item in CHECKS[stem] if not isinstance(item, Why)}


def unsupported(stem: str, records: dict) -> list[str]:
    """The Why questions of `stem` whose `holds` fails on `records`: the notebook no longer computes what the answer
    says it does."""
    out = []
    for item in CHECKS[stem]:
        if isinstance(item, Why) and item.holds is not None:
            try:
                failed = None if item.holds(records) else ""
            except (KeyError, IndexError, TypeError) as e:
                failed = f" ({e!r})"
            if failed is not None:
                out.append(f"{stem}: {item.question!r} no longer holds on the records{failed}")
    return out


def two_minute_check(stem: str) -> None:
    """Show the notebook's questions, each answer collapsed."""
    from IPython.display import Markdown, display

    display(Markdown(markdown(stem)))
