"""The collective traces and their analyzer (fmlab.hangs.analysis, fmlab.hangs.trace, `fmlab hangs`):

- in this process, on traces written by hand: a rank that left no trace is named with the collective the others
  waited in and its step; a rank alive but behind; a rank that skipped a collective (its #k is the others' #k+1,
  the same size: gloo pairs them silently); a plain mismatch; nothing wrong; bad folders and files refused;
- `fmlab hangs DIR`: the report, exit 0 when a rank is named, 1 when none, 2 on bad input;
- on 2-4 forked gloo processes (fmlab.labs.hang_traces, 2 s collective timeout): a hung rank of 4 and a rank that
  skipped an all-reduce of 2 are named from the traces the ranks really wrote, in seconds.

Run: .venv/bin/pytest tests/parallel/test_hangs.py     (about 15 s on 2 cores; -m "not distributed": 2 s)
"""

from __future__ import annotations

import json

import pytest

from fmlab.cli import main as cli
from fmlab.hangs.analysis import analyze, load_traces
from fmlab.hangs.trace import BUFFER_VARIABLE, CollectiveTrace, write_trace


def _entry(seq: int, step: int, op: str = "gloo:all_reduce", sizes=((4096,),), group: str = "default_pg") -> dict:
    return {"seq": seq, "op": op, "sizes": [list(s) for s in sizes], "group": group, "created_ns": 1000 * seq,
            "step": step, "p2p": False, "state": "scheduled"}


def _trace(rank: int, world: int, entries: list[dict], error: str = "Timed out waiting 3000ms") -> dict:
    return {"rank": rank, "world": world, "step": entries[-1]["step"] if entries else 0, "entries": entries,
            "failure": {"error": error}}


def _steps(last_step: int, per_step: int = 2) -> list[dict]:
    """Every collective of steps 1..last_step, per_step each, numbered 1, 2, 3 ... as a group numbers them."""
    return [_entry((s - 1) * per_step + i + 1, s) for s in range(1, last_step + 1) for i in range(per_step)]


def test_a_rank_that_left_no_trace_is_named_with_the_collective_and_step_the_others_waited_in():
    survivors = [_trace(r, 4, _steps(5)) for r in (0, 1, 3)]  # rank 2 froze before step 5's first all-reduce
    report = analyze(survivors)
    assert (report.kind, report.ranks, report.step, report.waiting, report.world) == ("missing", [2], 5, [0, 1, 3], 4)
    assert report.collective == "#10 gloo:all_reduce [[4096]] on group default_pg"
    assert report.headline.startswith("rank 2 stopped at step 5: never entered collective #10 gloo:all_reduce "
                                      "[[4096]] on group default_pg that ranks 0, 1, 3 waited in")
    assert "rank 0 failed with: Timed out waiting 3000ms" in str(report)
    assert analyze(survivors, world=5).ranks == [2, 4]  # a world given from outside counts too
    died = analyze([_trace(0, 2, _steps(5), "Read error [127.0.0.1]:8588: Connection reset by peer")])
    assert died.ranks == [1] and died.headline.endswith("it left no trace (its connection closed: the process died)")
    stale = {**_trace(2, 4, _steps(3)), "attempt": 0}
    restarted = [{**t, "attempt": 1} for t in survivors]
    assert analyze([*restarted, stale]).ranks == [2]  # a trace from before a restart is not this failure's


def test_a_rank_alive_but_behind_is_told_apart_from_a_dead_one():
    report = analyze([_trace(0, 2, _steps(5)), _trace(1, 2, _steps(4))])  # rank 1 never issued step 5's
    assert (report.kind, report.ranks, report.step) == ("behind", [1], 5)
    assert "stopped issuing collectives before #10" in report.headline and "alive" in report.headline


def test_a_rank_that_skipped_a_same_sized_collective_is_named_by_the_step_its_partners_were_in():
    skipped = [e for e in _steps(4) if e["seq"] != 6]  # rank 1 skipped step 3's second all-reduce ...
    for e in skipped[5:]:
        e["seq"] -= 1  # ... so each later one carries the number the others gave to the one before
    report = analyze([_trace(0, 2, _steps(4)), _trace(1, 2, skipped, "finished its steps")])
    assert (report.kind, report.ranks, report.step) == ("desync", [1], 3)
    assert report.headline.startswith("rank 1 skipped collective #6 gloo:all_reduce [[4096]] on group default_pg "
                                      "at step 3: its #6 is the others' #7")


def test_different_collectives_under_one_number_are_reported_with_each_ranks_op():
    other = _steps(2)
    other[-1] = _entry(4, 2, "gloo:broadcast", ((16,),))
    report = analyze([_trace(0, 2, _steps(2)), _trace(1, 2, other)])
    assert report.kind == "desync" and report.ranks == [0, 1]
    assert "rank 0: gloo:all_reduce [[4096]] at step 2; rank 1: gloo:broadcast [[16]] at step 2" in report.headline


def test_nothing_to_blame_and_bad_input():
    assert analyze([_trace(0, 2, _steps(3)), _trace(1, 2, _steps(3))]).kind == "none"
    with pytest.raises(ValueError, match="no collective traces to analyze"):
        analyze([])


def test_the_command_reads_a_folder_and_says_what_to_fix(tmp_path, capsys):
    folder = tmp_path / "traces"
    for r in (0, 2):
        write_trace(_trace(r, 3, _steps(3)), folder)
    assert sorted(p.name for p in folder.iterdir()) == ["rank-0.json", "rank-2.json"]  # no partial file left
    assert cli(["hangs", str(folder)]) == 0
    assert capsys.readouterr().out.startswith("rank 1 stopped at step 3: never entered collective #6")
    write_trace(_trace(1, 3, _steps(3)), folder)
    assert cli(["hangs", str(folder)]) == 1  # every rank reached the same collective: nobody to name
    assert cli(["hangs", str(tmp_path / "nowhere")]) == 2
    assert "is not a folder of collective traces" in capsys.readouterr().err
    (folder / "rank-3.json").write_text('{"rank": 3, "entr')
    with pytest.raises(ValueError, match="rank-3.json is not JSON"):
        load_traces(folder)
    (folder / "rank-3.json").write_text(json.dumps({"what": 1}))
    assert cli(["hangs", str(folder)]) == 2 and "not a collective trace" in capsys.readouterr().err


def test_the_recorder_is_switched_on_before_the_group_forms_and_steps_are_marked():
    env: dict = {}
    assert CollectiveTrace(entries=2000).enable("gloo", env) and env == {BUFFER_VARIABLE: "2000"}
    env = {BUFFER_VARIABLE: "50"}
    assert CollectiveTrace(entries=2000).enable("gloo", env) and env[BUFFER_VARIABLE] == "50"  # the user's wins
    assert not CollectiveTrace(entries=0).enable("gloo", {})
    env = {}
    CollectiveTrace(entries=10, folder="/tmp/fmlab-traces").enable("nccl", env)
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and env["TORCH_FR_DUMP_TEMP_FILE"].endswith("nccl_rank_")
    trace = CollectiveTrace()
    trace.step_marks = [(1, 100), (2, 200), (3, 300)]
    assert [trace.step_at(t) for t in (50, 100, 250, 999)] == [0, 1, 2, 3]


@pytest.mark.distributed
def test_a_hung_rank_of_four_and_a_skipped_all_reduce_are_named_from_real_gloo_traces(tmp_path):
    from fmlab.labs.hang_traces import run_drill

    hung = run_drill("hang", tmp_path / "hang", world_size=4, rank=2, step=3, timeout=2.0)
    print(f"hang drill, 4 ranks: {hung.seconds:.1f} s\n{hung.report}")
    assert sorted(t["rank"] for t in hung.traces) == [0, 1, 3]
    assert (hung.report.kind, hung.report.ranks, hung.report.step) == ("missing", [2], 3)
    assert all(t["recorder"] == "torch flight recorder" and t["entries"] for t in hung.traces)
    assert hung.seconds < 30

    skip = run_drill("skip", tmp_path / "skip", world_size=2, rank=1, step=3, timeout=2.0)
    print(f"skip drill, 2 ranks: {skip.seconds:.1f} s\n{skip.report}")
    assert (skip.report.kind, skip.report.ranks, skip.report.step) == ("desync", [1], 3)
    assert skip.report.collective.startswith("#6 gloo:all_reduce [[4096]]")
