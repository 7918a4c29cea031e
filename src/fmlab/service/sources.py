"""A fact's source: the page or file read, what it says, and when it was read (one type for the whole course).

    Source("Release notes for the SageMaker model parallelism library", "https://docs.aws.amazon.com/...",
           "Newest entry: ... v2.8.0, Date: April 01, 2025", read="2026-11-24")

fmlab.parallel.status (SMP v2, SMDDP) and fmlab.neuron.status (NxD, native PyTorch on Trainium) keep their facts as
Sources; fmlab.service.rules keeps service limits as Rules, which cite a source the same way (`cite()`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One page or file read, what it says (quoted or closely paraphrased), and when it was read."""

    title: str
    url: str
    says: str
    read: str  # the day it was read, YYYY-MM-DD
    release: str = ""  # the release (or commit) the page belongs to, when it names one

    def cite(self) -> str:
        return f"{self.title} ({self.url}), read {self.read}"
