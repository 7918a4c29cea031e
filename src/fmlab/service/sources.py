"""A fact's source: the page or file read, what it says, and when it was read (one type for the whole course).

    Source("Release notes for the SageMaker model parallelism library", "https://docs.aws.amazon.com/...",
           "Newest entry: ... v2.8.0, Date: April 01, 2025", read="2026-11-24")

fmlab.service.libraries (SMP v2, SMDDP) and fmlab.neuron.status (NxD, native PyTorch on Trainium) keep their facts as
Sources (`sources_of` lists each once, `cited` writes a table's "sources" cell); fmlab.service.rules keeps service
limits as Rules, which cite a source the same way (`cite()`).
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


def sources_of(entries) -> list[Source]:
    """Every Source of `entries` (things with a `sources` tuple, such as a status module's rows), once each, in
    the order they first appear."""
    seen: dict[str, Source] = {}
    for entry in entries:
        for s in entry.sources:
            seen.setdefault(s.url + s.title, s)
    return list(seen.values())


def cited(sources) -> str:
    """A status table's "sources" cell: "title (url, read YYYY-MM-DD); ..."."""
    return "; ".join(f"{s.title} ({s.url}, read {s.read})" for s in sources)
