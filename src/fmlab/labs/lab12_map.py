"""Where each platform and recovery option wins, and why: notebook 12's map, made with lab 12's own search.

    from fmlab.labs import lab12_map
    rows = lab12_map.where_each_wins()     # MAP's briefs: the best plan per platform and recovery, and the choice
    lab12_map.choices(7)                   # the briefs lab 12 draws from seed 7: what the search chose for each

Each brief of MAP is one reason a learner can name:
- an 8B run the team may put on training jobs or Slurm, at Llama 3's failure rate: HyperPod's faster restart buys
  neither a reserved day nor a point of P(miss), so the simpler platform wins (training jobs);
- module 7's 30B run, 270B tokens in 6 days: a training job's restart is a new job (its start-up and the synced
  checkpoint download), and on this run those restarts cost a reserved day: HyperPod Slurm;
- a 70B run that needs 128 or 256 instances: a training job takes one training plan, at most 64 instances, and 64
  are too slow for the deadline: HyperPod (a plan per instance group);
- a 70B run with as many loss spikes as PaLM's and 30-minute restarts: tiered checkpoints save to host memory in a
  second, so their interval is short and each rollback loses less; fewer runs outlive the reservation, and its P90
  cost is the lowest (EKS only);
- a 70B run at the research clusters' failure rate with 30-minute replacements and 30-minute restarts, no upkeep and
  nothing it cannot absorb: checkpointless skips the job's restart; at the same P90 cost it misses points less
  often (EKS only).

Each plan is the search's (`lab12._candidates`): sized to P(miss) within the draw's DRAW_MISS on the first seed,
graded under the check's seeds; the choice is `lab12.best_of` (the cheapest at P90; within TIE_BAND of it, the
simplest unless more machinery buys MISS_POINT of P(miss)). Like the search, it refuses inside a learner's plan_run.
"""

from __future__ import annotations

from dataclasses import dataclass

from fmlab.labs import lab12
from fmlab.plan import capstone, platforms

_JOBS_OR_SLURM = ("training jobs", "HyperPod Slurm")
_HYPERPOD = ("HyperPod Slurm", "HyperPod EKS")


@dataclass(frozen=True)
class MapBrief:
    """One brief of the map, the option the search should choose for it, and why (tests hold the choice to it)."""

    brief: capstone.Brief
    expected: tuple[str, str]  # (platform, recovery)
    why_template: str  # the reason, its figures read from the brief ({b.field})

    @property
    def why(self) -> str:
        return self.why_template.format(b=self.brief)


MAP: list[MapBrief] = [
    MapBrief(capstone.Brief("8B, 2T tokens, jobs or Slurm", "llama3.1-8b", 2e12, deadline_days=16, budget_usd=1e7,
                            platforms=_JOBS_OR_SLURM),
             ("training jobs", "checkpoint to S3"),
             "HyperPod's faster restart buys neither a reserved day nor a point of P(miss): the simpler platform"),
    MapBrief(capstone.Brief("30B, 270B tokens in 6 days", "gpt-30b", 270e9, deadline_days=6, budget_usd=1e7,
                            platforms=_JOBS_OR_SLURM),
             ("HyperPod Slurm", "checkpoint to S3"),
             "a training job's restart is a new job (start-up, then every kept save downloaded to every node): on "
             "this run those restarts cost a reserved day"),
    MapBrief(capstone.Brief("70B, 1.5T tokens, up to 256 nodes", "llama3.1-70b", 1.5e12, deadline_days=30,
                            budget_usd=1e8, platforms=_JOBS_OR_SLURM, max_nodes=256),
             ("HyperPod Slurm", "checkpoint to S3"),
             "a training job takes one training plan, at most 64 instances, too few for the deadline; a HyperPod "
             "cluster takes a plan per instance group"),
    MapBrief(capstone.Brief("70B, many loss spikes, slow restarts", "llama3.1-70b", 1.05e12, deadline_days=18,
                            budget_usd=1e8, platforms=_HYPERPOD, max_nodes=256, node_mtbf_hours=6000.0,
                            hang_share=0.075, restart_failure_share=0.07, late_probability=0.02,
                            late_mean_hours=68.0, fallback_wait_mean_hours=216.0, spikes_per_run=20.0,
                            unwatched_hours=3.3, alert_share=0.55, alert_hours=0.26, sync_over_async=5.0,
                            replace_node_minutes=13.0, restart_minutes=30.0, unrecoverable_share=0.22,
                            checkpointless_overhead=0.066),
             ("HyperPod EKS", "tiered: memory, then S3"),
             "{b.spikes_per_run:g} loss spikes expected: a save to host memory takes a second, so the interval is "
             "short and each rollback loses less; checkpointless pays {b.checkpointless_overhead:.1%} upkeep and "
             "cannot absorb {b.unrecoverable_share:.0%} of failures"),
    MapBrief(capstone.Brief("70B, frequent failures, slow recoveries", "llama3.1-70b", 1e12, deadline_days=20,
                            budget_usd=1e8, platforms=_HYPERPOD, max_nodes=256, node_mtbf_hours=3700.0,
                            restart_failure_share=0.1, late_probability=0.02, fallback_wait_mean_hours=216.0,
                            unwatched_hours=3.3, sync_over_async=10.0, replace_node_minutes=30.0,
                            restart_minutes=30.0, unrecoverable_share=0.0, checkpointless_overhead=0.0),
             ("HyperPod EKS", "checkpointless"),
             "a node fails every {b.node_mtbf_hours:,.0f} node-hours, each failure a {b.replace_node_minutes:g}-minute "
             "replacement and a {b.restart_minutes:g}-minute restart: checkpointless skips the restart and redoes "
             "half a step, with no upkeep and nothing it cannot absorb"),
]
MAP_BRIEFS: dict[str, capstone.Brief] = {m.brief.name: m.brief for m in MAP}


def where_each_wins(briefs: dict[str, capstone.Brief] | None = None) -> list[dict]:
    """For each brief, the best plan of each (platform, recovery) the search found, the one chosen, and what the
    chosen one saves over each other (P90 dollars, reserved days, points of P(miss))."""
    rows = []
    for brief in (briefs or MAP_BRIEFS).values():
        found = lab12.candidates(brief, max_miss=lab12.DRAW_MISS)
        chosen, chosen_grade = lab12.best_of(found)
        by_option: dict[tuple[str, str], list] = {}
        for run, g in found:
            by_option.setdefault((run.platform, run.recovery), []).append((run, g))
        for where in brief.platforms:
            for recovery in platforms.platform(where).recoveries:
                run, g = lab12.best_of(by_option.get((where, recovery), []))
                row = {"brief": brief.name, "platform": where, "recovery": recovery, "chosen": run is not None
                       and chosen is not None and (run.platform, run.recovery) == (chosen.platform, chosen.recovery)}
                if run is None:
                    row.update(nodes=None, days=None, p_miss=None, cost_p90=None, over_chosen=None)
                else:
                    row.update(nodes=run.nodes, days=run.reserved_days, p_miss=round(g.p_miss, 3),
                               cost_p90=round(g.cost_p90), over_chosen=round(g.cost_p90 - chosen_grade.cost_p90))
                rows.append(row)
    return rows


def choices(seed: int) -> list[tuple[str, str, int]]:
    """For each brief lab 12 draws from `seed` (`lab12.draw`), the search's choice: (platform, recovery, how many
    platforms the brief allowed). benchmarks/lab12_winners.py counts them over many seeds."""
    out = []
    for brief, _cost in lab12.draw(seed):
        run, _grade = lab12.best_of(lab12.candidates(brief, max_miss=lab12.DRAW_MISS))
        if run is not None:
            out.append((run.platform, run.recovery, len(brief.platforms)))
    return out
