"""Should you pretrain? The checklist of module 1 as data, and a plain-words recommendation.

    from fmlab.plan.decision import QUESTIONS, recommend
    recommend({"prompting_tried": True, "finetuning_tried": True, ...})

The questions follow the AWS pretraining lesson's prerequisites: pretraining is the last resort after
prompting and fine-tuning have been tried, feedback collected and the failures located, and it needs data,
budget and people that most projects do not have.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    key: str
    text: str
    if_no: str  # what to do instead when the answer is no


QUESTIONS = [
    Question("prompting_tried", "Have you tried prompt engineering and retrieval (RAG) with existing models?",
             "start with prompting and retrieval: they cost hours, not months"),
    Question("finetuning_tried", "Have you fine-tuned an existing open model on your task data?",
             "fine-tune (or parameter-efficient fine-tune) an open model first"),
    Question("feedback_collected", "Have you collected user feedback and evaluations showing where models fail?",
             "build an evaluation set and collect feedback: you cannot tell whether pretraining helped without it"),
    Question("failure_is_domain", "Do the failures come from missing domain knowledge or language "
             "(vocabulary, tokenisation, facts) rather than task format?",
             "format and behaviour problems are fixed by fine-tuning, not pretraining"),
    Question("data_at_scale", "Do you own (or may you use) hundreds of billions of tokens of relevant text?",
             "collect more data, or continue pretraining an open model on the data you have"),
    Question("budget", "Can you fund the compute (see the planner below) and several failed attempts?",
             "size the model to the budget with the planner, or continue pretraining a smaller open model"),
    Question("team", "Do you have people to run a months-long distributed job and respond to failures?",
             "use a managed route (SageMaker HyperPod, a partner) or stay with fine-tuning"),
]


def recommend(answers: dict[str, bool]) -> tuple[str, list[str]]:
    """("pretrain" | "continue pretraining" | "fine-tune" | "prompt", reasons), from yes/no answers.

    Unanswered questions count as "no": pretraining must be argued for, not assumed.
    """
    unknown = set(answers) - {q.key for q in QUESTIONS}
    if unknown:
        raise KeyError(f"unknown checklist keys {sorted(unknown)}; expected {[q.key for q in QUESTIONS]}")
    missing = [q for q in QUESTIONS if not answers.get(q.key, False)]
    reasons = [f"{q.text} -> no: {q.if_no}" for q in missing]
    keys = {q.key for q in missing}
    if "prompting_tried" in keys:
        return "prompt", reasons
    if keys & {"finetuning_tried", "feedback_collected", "failure_is_domain"}:
        return "fine-tune", reasons
    if keys:
        return "continue pretraining", reasons
    return "pretrain", ["every prerequisite holds: plan the run with a phased scaling plan"]
