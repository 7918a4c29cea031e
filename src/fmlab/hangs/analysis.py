"""Which rank stopped, in which collective, at which step: the analyzer of the per-rank collective traces.

    from fmlab.hangs.analysis import analyze, load_traces
    report = analyze(load_traces("out/collective-traces"))   # the rank-N.json files the surviving ranks wrote
    print(report)             # "rank 1 stopped: it never entered collective #37 (gloo:all_reduce ...) ..."
    report.ranks, report.collective, report.step
    fmlab hangs out/collective-traces                         # the same from the command line (fmlab.cli)

A trace (fmlab.hangs.trace writes one per surviving rank when a collective fails) holds that rank's
last collectives as PyTorch's Flight Recorder saw them (op, sizes, process group, sequence number), each with
the training step it was issued in, and the error the rank failed with. Collectives are matched across ranks
by (process group, sequence number): every rank of a group numbers its collectives 1, 2, 3 ... in issue order,
which is what lets the analyzer tell the three ways a synchronous job stops (module 8):

- missing: a rank left no trace. A dead rank (SIGKILL, OOM) cannot write one, nor a frozen one (SIGSTOP, a host
  that stopped scheduling it) or one hung outside the collectives (a deadlock); the others wait in the
  collective it never entered.
- behind: a rank wrote a trace (it is alive) but issued fewer collectives than the others: it stopped issuing
  them (stuck in the data loader, or in Python that never reaches the next collective).
- desync: at the same sequence number ranks issued different collectives (op or sizes). When one rank's
  collective #k is the others' #k+1, that rank skipped the others' #k.

PyTorch ships the same idea for its own dumps (`torchfrtrace <folder>`, torch.distributed.flight_recorder,
which matches NCCL's dump files across ranks and prints the first mismatch); this analyzer reads fmlab's JSON
traces on any backend and says it in one sentence with the training step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

TRACE_GLOB = "rank-*.json"


@dataclass
class HangReport:
    """What the traces say: the kind of stop, the rank(s) responsible, the collective and the step."""

    kind: str  # "missing" | "behind" | "desync" | "none" (every rank agrees and none is missing)
    ranks: list[int]  # the rank(s) that stopped or went out of step
    collective: str  # e.g. "#37 gloo:all_reduce [[655360]] on group default_pg"
    step: int | None  # the training step the others were in when they waited
    waiting: list[int] = field(default_factory=list)  # the ranks that wrote a trace
    world: int = 0
    lines: list[str] = field(default_factory=list)  # the report, one finding per line

    def __str__(self) -> str:
        return "\n".join(self.lines)

    @property
    def headline(self) -> str:
        return self.lines[0] if self.lines else ""


def load_traces(folder: str | Path) -> list[dict]:
    """Every rank-N.json under `folder` (a ValueError naming the file if one is not a trace)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of collective traces: give the folder the run wrote them to "
                         f"(--trace-dir, by default <output dir>/collective-traces)")
    traces = []
    for path in sorted(folder.glob(TRACE_GLOB)):
        try:
            trace = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not JSON ({e}): a trace cut short? delete it and analyze the others") from None
        if not isinstance(trace, dict) or "rank" not in trace or "entries" not in trace:
            raise ValueError(f"{path} has no 'rank' and 'entries': not a collective trace written by fmlab")
        traces.append(trace)
    return traces


def _describe(entry: dict) -> str:
    return f"#{entry['seq']} {entry['op']} {entry['sizes']} on group {entry['group']}"


def _by_group(trace: dict) -> dict[str, dict[int, dict]]:
    groups: dict[str, dict[int, dict]] = {}
    for e in trace["entries"]:
        groups.setdefault(e["group"], {})[e["seq"]] = e
    return groups


def _last(trace: dict) -> dict | None:
    """The collective this rank issued last (the one it failed in, if it failed in one)."""
    return max(trace["entries"], key=lambda e: e["created_ns"], default=None)


def _signature(entry: dict) -> tuple:
    return entry["op"], json.dumps(entry["sizes"]), entry.get("step")


def _desync(traces: list[dict]) -> HangReport | None:
    """The first sequence number, in any group, at which ranks issued different collectives (op, sizes, or the
    step they were issued in: same-sized collectives match silently, a step apart)."""
    by_rank = {t["rank"]: _by_group(t) for t in traces}
    for group in sorted({g for groups in by_rank.values() for g in groups}):
        ranks = {r: groups.get(group, {}) for r, groups in by_rank.items()}
        for seq in sorted({s for entries in ranks.values() for s in entries}):
            here = {r: entries[seq] for r, entries in ranks.items() if seq in entries}
            if len(here) < 2 or len({_signature(e) for e in here.values()}) < 2:
                continue
            for r, e in sorted(here.items()):  # one rank's #k is the others' #k+1: it skipped their #k
                others = [o for o in here if o != r]
                if all(_signature(ranks[o].get(seq + 1) or {"op": None, "sizes": None}) == _signature(e)
                       for o in others):
                    theirs = here[others[0]]
                    return HangReport("desync", [r], _describe(theirs), theirs.get("step"), sorted(here), lines=[
                        f"rank {r} skipped collective {_describe(theirs)} at step {theirs.get('step')}: its "
                        f"#{seq} is the others' #{seq + 1} ({e['op']} {e['sizes']}, step {e.get('step')}), so every "
                        f"later collective of the group is out of step (a rank-dependent branch around a collective?)"])
            shown = "; ".join(f"rank {r}: {e['op']} {e['sizes']} at step {e.get('step')}" for r, e in sorted(here.items()))
            return HangReport("desync", sorted(here), f"#{seq} on group {group}", here[min(here)].get("step"),
                              sorted(here), lines=[f"ranks issued different collectives as #{seq} on group {group}: "
                                                   f"{shown}"])
    return None


def analyze(traces: list[dict], world: int | None = None) -> HangReport:
    """Name the rank that stopped, the collective the others wait in and the step, from the surviving ranks'
    traces (`world`: the number of ranks, else the largest the traces give)."""
    if not traces:
        raise ValueError("no collective traces to analyze: every rank died before writing one, or the folder is "
                         "wrong (the run prints where it wrote them: 'collective trace: ...')")
    newest = max(int(t.get("attempt", 0)) for t in traces)  # a restarted job's traces replace its earlier ones
    traces = [t for t in traces if int(t.get("attempt", 0)) == newest]
    world = world or max(int(t.get("world", 0)) for t in traces)
    present = sorted(t["rank"] for t in traces)
    missing = sorted(set(range(world)) - set(present))
    report = _desync(traces)
    if report is not None:
        report.world = world
        report.lines += [f"rank {r} left no trace (dead, frozen or hung)" for r in missing]
        return report
    lasts = [e for e in (_last(t) for t in traces) if e is not None]
    # With a rank missing, the survivors' last collective issued first is where the job stopped (with subgroups a
    # survivor can wait in a later one, on another survivor that waits on the missing rank). With none missing,
    # it is a last collective that some rank of its group never issued.
    unmatched = [e for e in lasts if any(e["seq"] not in g.get(e["group"], {e["seq"]: e})
                                         for g in map(_by_group, traces))]
    waited = min(lasts, key=lambda e: e["created_ns"]) if missing and lasts else \
        max(unmatched or lasts, key=lambda e: e["created_ns"], default=None)
    if waited is None:
        return HangReport("none" if not missing else "missing", missing, "", None, present, world,
                          [f"ranks {present} issued no collective yet" + (f"; no trace from ranks {missing}" if missing else "")])
    where = _describe(waited)
    step = waited.get("step")
    in_group = [t for t in traces if waited["group"] in _by_group(t)]  # ranks that issued on that group
    behind = sorted(t["rank"] for t in in_group if waited["seq"] not in _by_group(t)[waited["group"]])
    failed = {t["rank"]: (t.get("failure") or {}).get("error", "") for t in traces}
    waiting = [r for r in present if r not in behind]
    if missing:
        names = ", ".join(str(r) for r in missing)
        closed = all(any(w in failed[r].lower() for w in ("closed by peer", "reset by peer")) for r in present)
        why = ("its connection closed: the process died" if closed and len(missing) == 1 else
               "dead, frozen, or hung outside a collective")
        lines = [f"rank{'s' if len(missing) > 1 else ''} {names} stopped at step {step}: never entered collective "
                 f"{where} that rank{'s' if len(waiting) > 1 else ''} {', '.join(map(str, waiting))} waited in; "
                 f"{'they' if len(missing) > 1 else 'it'} left no trace ({why})"]
        kind, ranks = "missing", missing
    elif behind:
        lines = [f"rank{'s' if len(behind) > 1 else ''} {', '.join(map(str, behind))} stopped issuing collectives "
                 f"before {where} (step {step}); alive, it wrote a trace: stuck outside the collectives (data loader, "
                 f"a deadlock in Python)"]
        kind, ranks = "behind", behind
    else:
        lines = [f"all {world} ranks reached collective {where} at step {step}; no rank is missing or behind"]
        kind, ranks = "none", []
    for r in present:
        if failed.get(r):
            lines.append(f"rank {r} failed with: {failed[r][:160]}")
    return HangReport(kind, ranks, where, step, waiting, world, lines)
