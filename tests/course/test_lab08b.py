"""Lab 08b (the failure zoo) without a notebook: its data, its grading and its log reading (seconds: the refused
request goes through the local SageMaker sandbox).
The solved and unsolved notebooks run in tests/course/test_labs.py."""

import re

import pytest

from fmlab.labs import lab08b
from fmlab.labs.zoo_cases import CAUSES, FIRST_MINUTE, FIXES, QUOTED, quoted


def test_every_quoted_case_is_sourced_and_graded_from_the_fixed_lists():
    assert len(QUOTED) >= 15
    assert len({c.id for c in QUOTED}) == len(QUOTED)
    for case in QUOTED:
        assert case.source.startswith("https://github.com/") and "/issues/" in case.source, case.id
        assert case.cause in CAUSES and case.fixes and all(f in FIXES for f in case.fixes), case.id
        assert case.excerpt.strip() and case.posted[:2] == "20", case.id
    assert [c for c, _, _ in FIRST_MINUTE] and all(c in CAUSES for c, _, _ in FIRST_MINUTE)
    assert len(FIRST_MINUTE) == 5
    with pytest.raises(KeyError, match="q01_no_plugin"):
        quoted("q99")


def test_grading_names_what_is_wrong_without_giving_the_answer():
    cases = {"a": ("hung_rank", ("find_straggler",)), "b": ("quota", ("quota_increase",))}
    wrong, right = lab08b._grade({"a": ("hung_rank", "find_straggler"), "b": ("quota", "quota_increase")}, cases)
    assert not wrong and len(right) == 2
    wrong, _ = lab08b._grade({"a": ("dead_rank", "find_straggler"), "b": ("quota", "rewind"), "c": ("x", "y")},
                             cases)
    text = " ".join(wrong)
    assert "a: not that cause" in text and "b: the cause is right" in text and "no case named 'c'" in text
    assert "hung_rank" not in text  # the true cause is never printed
    wrong, _ = lab08b._grade({"a": ("hung", "find_straggler")}, cases)
    assert "cause 'hung' is not on the list" in wrong[0] and "b: not diagnosed yet" in wrong[1]


def test_check_quoted_fails_unanswered_and_wrong_and_passes_the_threads_diagnoses():
    assert lab08b.check_quoted({}) is False
    assert lab08b.check_quoted({c.id: ("dead_rank", "rewind") for c in QUOTED}) is False
    assert lab08b.check_quoted({c.id: (c.cause, c.fixes[0]) for c in QUOTED}) is True


def test_check_live_grades_against_what_the_drill_established():
    drills = {"live_x": lab08b.Drill("live_x", "a run", ["error"], "hung_rank", "the victim hung", ("find_straggler",))}
    assert lab08b.check_live({"live_x": ("hung_rank", "find_straggler")}, drills) is True
    assert lab08b.check_live({"live_x": ("dead_rank", "find_straggler")}, drills) is False
    drills["live_x"].happened = ""  # the drill did not reproduce: no answer can pass
    assert lab08b.check_live({"live_x": ("hung_rank", "find_straggler")}, drills) is False


def test_survivor_lines_hide_the_victims_confession_and_keep_both_backends_words():
    log = "\n".join([
        "fault: rank 1 hangs (sleeps for ever, joins no collective) at step 3",
        "error: a collective waited longer than the collective timeout (3 s). Backend said: [/x/gloo/transport/tcp/"
        "unbound_buffer.cc:129] Timed out waiting 3000ms for send operation to complete",
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/x/train.py", line 21, in <module>',
        "[rank0]: RuntimeError: [/x/pair.cc:553] Connection closed by peer [127.0.0.1]:5539.",
        "  exitcode  : -9 (pid: 13219)  (SIGKILL)",
        "step=2 loss=6.1"])
    lines = lab08b.survivor_lines(log)
    assert not any("fault:" in ln or "hangs" in ln for ln in lines)
    assert any(ln.startswith("[/x/gloo") and "Timed out waiting 3000ms" in ln for ln in lines)
    assert any(ln.startswith("RuntimeError") and "Connection closed by peer" in ln for ln in lines)
    assert "  exitcode  : -9 (pid: 13219)  (SIGKILL)" in lines
    assert not any("File" in ln or "step=" in ln for ln in lines)


def test_exercise_3_grades_rank_collective_and_step_from_traces(tmp_path):
    """check_traces against hand-written traces: the right triple passes, a wrong step fails naming the step,
    the unsolved stub and no cases fail."""
    from fmlab.hangs.trace import write_trace

    folder = tmp_path / "case"
    entries = [{"seq": s, "op": "gloo:all_reduce", "sizes": [[8]], "group": "default_pg", "step": (s + 1) // 2,
                "created_ns": s} for s in range(1, 6)]
    write_trace({"rank": 0, "world": 2, "entries": entries}, folder)
    cases = {"c": lab08b.TraceCase("c", "a hang", folder, 2, rank=1, seq=5, step=3)}
    assert lab08b.check_traces(lambda traces, world: (1, 5, 3), cases) is True
    assert lab08b.check_traces(lambda traces, world: (1, 5, 2), cases) is False

    def unsolved(traces, world):
        raise NotImplementedError

    assert lab08b.check_traces(unsolved, cases) is False
    assert lab08b.check_traces(lambda traces, world: (1, 5, 3), {}) is False


def test_each_case_says_what_its_excerpt_is_and_the_thread_fix_where_the_course_names_its_own():
    from fmlab.labs.zoo_cases import KINDS

    assert all(c.kind in KINDS for c in QUOTED)
    assert sorted(c.id for c in QUOTED if c.kind == "prose") == ["q03_p5e_no_efa_env", "q08_sigkill_on_save",
                                                                  "q14_loss_nan"]
    assert quoted("q01_no_plugin").kind == "log, another job" and "Imagine" not in quoted("q01_no_plugin").context
    assert "zero3_init_flag" in quoted("q08_sigkill_on_save").thread_fix  # accelerate#2722's own way out


def test_the_fully_shard_case_names_the_release_the_service_checks():
    from fmlab.service.features import FEATURES

    case = quoted("q12_import_fully_shard")
    assert f"older than {FEATURES['fsdp2'].min_pytorch}" in case.title and FEATURES["fsdp2"].min_pytorch == "2.6"
    assert "#141868" in case.context and "#141868" in FEATURES["fsdp2"].source


def test_a_rank_working_alone_is_a_cause_of_its_own_with_a_watchdog_case():
    alone = [c for c in QUOTED if c.cause == "rank_alone"]
    assert alone and all("Watchdog caught collective operation timeout" in c.excerpt for c in alone)
    assert "share_or_wait_longer" in FIXES and all(c.fixes == ("share_or_wait_longer",) for c in alone)
    assert "find_straggler" not in alone[0].fixes  # no node is at fault


def test_the_drills_are_shown_under_neutral_ids_in_each_learners_own_order(tmp_path):
    """The order comes from a seed drawn once per work folder: the same on a re-run, different between learners."""
    seed = lab08b.learner_seed(tmp_path / "me")
    assert lab08b.learner_seed(tmp_path / "me") == seed  # kept: a re-run shows the same ids
    assert (tmp_path / "me" / lab08b.SEED_FILE).read_text().strip() == str(seed)
    order = lab08b.drill_order(seed)
    assert sorted(order) == sorted(lab08b.DRILLS)
    others = {tuple(lab08b.drill_order(lab08b.learner_seed(tmp_path / f"learner-{n}"))) for n in range(30)}
    assert len(others) > 5  # a room of learners sees many orders (24 are possible)
    assert len({tuple(lab08b.drill_order(seed)) for seed in range(20)}) > 5


def test_the_solution_reads_the_logs_instead_of_copying_an_order():
    """The solution diagnoses each drill from its log lines (as the learner must), so it holds for any seed: run on
    the four logs the drills print, under every id order."""
    import json

    from fmlab.environment import ROOT

    nb = json.loads((ROOT / "labs" / "solutions" / "lab_08b_failure_zoo.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if "live_diagnosis = " in "".join(c["source"]))
    assert not re.search(r'"drill_\d"', cell)  # no id is written down
    logs = {"damaged": ["resume: checkpoint /w/step_00000002 is corrupt: __0_0.distcp is 343,324 bytes"],
            "refused": ["CreateTrainingJob request is invalid (1 problem):", "  [max-runtime]: MaxRuntimeInSeconds"],
            "kill": ["failed (exitcode: -9) local_rank: 1", "  exitcode  : -9 (pid: 3)  (SIGKILL)",
                     "rank 0 (its trace, rank-0.json): Read error [127.0.0.1]:1938: Connection reset by peer."],
            "hang": ["error: a collective waited longer than the collective timeout (3 s, --collective-timeout)",
                     "Timed out waiting 3000ms for send operation to complete", "closing signal SIGTERM"]}
    made = {"hung_rank": "hang", "dead_rank": "kill", "damaged_checkpoint": "damaged", "invalid_request": "refused"}
    for seed in (0, 1, 2, 3):
        order = lab08b.drill_order(seed)
        drills = {f"drill_{n}": lab08b.Drill(f"drill_{n}", "w", logs[kind], "", "", ()) for n, kind in
                  enumerate(order, 1)}
        scope = {"drills": drills}
        exec(cell.split("lab08b.check_live")[0].replace("### BEGIN SOLUTION: live_diagnosis = {}", "")
             .replace("### END SOLUTION", ""), scope)
        assert {k: made[cause] for k, (cause, _) in scope["live_diagnosis"].items()} == {
            f"drill_{n}": kind for n, kind in enumerate(order, 1)}


def test_the_refused_request_breaks_a_service_rule_not_a_spelling():
    drill = lab08b._refused_drill("drill_9")
    assert drill.happened == "invalid_request" and drill.evidence.endswith("[max-runtime]")
    assert any("28 days" in line for line in drill.log) and lab08b.MONTH_S > 28 * 86400


def test_a_survivor_stopped_before_it_printed_is_read_from_its_trace(tmp_path):
    import json

    (tmp_path / "rank-0.json").write_text(json.dumps({"rank": 0, "entries": [], "failure": {
        "error": "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
                 "[127.0.0.1]:45744: Connection reset by peer. This is typically caused by a remote worker hanging"}}))
    assert lab08b.traced_errors(tmp_path) == [
        "rank 0 (its trace, rank-0.json): [.../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:45744: "
        "Connection reset by peer."]
    assert lab08b.traced_errors(tmp_path / "absent") == []


def test_the_training_drills_are_made_once_and_copied_with_their_folders(tmp_path, monkeypatch):
    """The solved and unsolved labs share one pair of training drills (build/cache/drills/): a second call copies
    them, names folders under its own work dir, and a pair that did not reproduce is made again."""
    from fmlab.labs import lab08b
    from fmlab.train import cache

    made = []

    def fake(kind, happened="yes"):
        def drill(data, base, drill_id):
            made.append(kind)
            (base / f"{kind}-out").mkdir(parents=True)
            (base / f"{kind}-out" / "rank-0.json").write_text(kind)
            return lab08b.Drill(drill_id, "w", [kind], happened, "e", ("f",), extra={"traces": base / f"{kind}-out"},
                                made=kind)
        return drill

    monkeypatch.setattr(cache, "CACHE", tmp_path / "cache" / "runs")
    monkeypatch.setattr(lab08b, "_hang_drill", fake("hang"))
    monkeypatch.setattr(lab08b, "_kill_drill", fake("kill"))
    ids = {"hang": "drill_1", "kill": "drill_2"}
    for work in ("a", "b"):
        base = tmp_path / work
        base.mkdir()
        hang, kill = lab08b._training_drills("data", base, ids)
        assert hang.extra["traces"] == base / "hang-out" and (base / "hang-out" / "rank-0.json").read_text() == "hang"
        assert kill.id == "drill_2" and kill.log == ["kill"]
    assert made == ["hang", "kill"]  # made once, copied the second time

    monkeypatch.setattr(lab08b, "_hang_drill", fake("hang", happened=""))
    for work in ("c", "d"):
        (tmp_path / work).mkdir()
        lab08b._training_drills("data", tmp_path / work, {"hang": "drill_2", "kill": "drill_1"})
    assert made == ["hang", "kill"] + ["hang", "kill"] * 2  # not reproduced: not kept, made again
