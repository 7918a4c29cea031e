"""Checks for labs/lab_08b_failure_zoo.ipynb: triage real training failures, quoted and live.

    lab08b.show_lists()                     # the fixed lists of causes and fixes
    lab08b.show_quoted()                    # 18 failures from public threads, each with its thread and kind
    lab08b.check_quoted(diagnosis)          # ex1: {case id: (cause, fix)} for every quoted case
    drills = lab08b.run_drills(work)        # 4 failures made to happen here, shown as drill_1..4 (about 30 s;
                                            # the training drills are then kept: build/cache/drills/)
    lab08b.show_drills(drills)              # what the surviving rank, torchrun and the sandbox said
    lab08b.check_live(live_diagnosis, drills)  # ex2: {drill id: (cause, fix)}, against what actually happened
    cases = lab08b.trace_cases(drills, work)   # the collective traces the survivors wrote, 4 cases (about 10 s)
    lab08b.check_traces(who_stopped, cases)    # ex3: who_stopped(traces, world) -> (rank, collective #, step)
    lab08b.summary()                        # raises LabIncomplete while any check fails

The quoted cases and the fixed lists are data, with their sources, in `fmlab.labs.zoo_cases`. The drills use
the course's own machinery, nothing staged: the training entry point's fault drills (`fmlab.train.faults`:
a rank that hangs, a rank that is SIGKILLed) on 2 gloo processes under torchrun, a checkpoint of the killed
run damaged the way a cut copy would be and opened as a resume opens it (`checkpoint.newest_intact`), and a job
request that the local SageMaker sandbox refuses (`sandbox.service.submit`: a month of MaxRuntimeInSeconds,
above the service's 28 days). The drills are shown under neutral ids (drill_1 ... drill_4) in an order drawn
from a seed of the learner's own (`learner_seed`: drawn once, kept in the work folder), so neither the id, nor the
place, nor a neighbour's answer gives it. What happened in each drill is
read back from the drill itself (the fault line the victim printed, which the learner does not see; the
damage found; the fields refused), and the learner's diagnosis is checked against that, not against a table.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from fmlab.labs import Lab, fresh_folder
from fmlab.labs.zoo_cases import CAUSES, FIRST_MINUTE, FIXES, KINDS, QUOTED

LAB = Lab("lab 08b", ["ex1_quoted_cases", "ex2_live_drills", "ex3_hung_rank_from_traces"])

COLLECTIVE_TIMEOUT = 3  # seconds the hung-rank drill's survivor waits (600 in a real job)
DRILL_TIMEOUT = 120  # seconds any one drill may run before it is killed whole
STEPS, FAULT_STEP = 4, 3  # the drills train 4 steps; the fault strikes before step 3 (after 2 checkpoints)
DRILLS = ("hang", "kill", "damaged", "refused")  # the order they run in (the damage drill needs the kill drill's)
SEED_FILE = "drill-seed"  # in the work folder: the learner's own order, the same on every re-run
MONTH_S = 30 * 86400  # the refused request's MaxRuntimeInSeconds: a month, above SageMaker's 28 days


# ---------------------------------------------------------------- showing the cases


def show_lists() -> None:
    """Print the fixed lists: the causes and the fixes a diagnosis picks from."""
    print("CAUSES")
    for key, text in CAUSES.items():
        print(f"  {key:22} {text}")
    print("\nFIXES")
    for key, text in FIXES.items():
        print(f"  {key:24} {text}")


def show_quoted() -> None:
    """Print every quoted case: its id, what the job was, what the excerpt is, the excerpt and its thread."""
    for case in QUOTED:
        print(f"=== {case.id}: {case.title}")
        print(f"    [{case.kind}: {KINDS[case.kind]}]")
        if case.context:
            print(f"    ({case.context})")
        for line in case.excerpt.splitlines():
            print(f"    | {line}")
        print(f"    source: {case.source} (posted {case.posted}; read {case.read})\n")


def show_sources() -> None:
    """The public threads every quoted case comes from, one per line, with what each excerpt is; where the fix
    the lab names is the course's and not the thread's, what the thread did."""
    for case in QUOTED:
        print(f"  {case.id:24} {case.source} (posted {case.posted}; {case.kind})")
        if case.thread_fix:
            print(f"  {'':24} the fix named is the course's, not the thread's: {case.thread_fix}")


def show_first_minute() -> None:
    """The five most common failures and how to recognise each in the first minute."""
    for cause, words, how in FIRST_MINUTE:
        print(f"  {cause:22} look for: {words}\n  {'':22} confirm:  {how}")


# ---------------------------------------------------------------- grading a diagnosis


def _grade(answers, cases: dict[str, tuple[str, tuple[str, ...]]]) -> tuple[list[str], list[str]]:
    """(wrong, right) lines for {id: (cause, fix)} against {id: (true cause, accepted fixes)}."""
    if not isinstance(answers, dict):
        raise TypeError("give a dict {case id: (cause, fix)}")
    wrong, right = [], []
    unknown = sorted(set(answers) - set(cases))
    if unknown:
        wrong.append(f"no case named {', '.join(map(repr, unknown))} (the ids: {', '.join(cases)})")
    for case_id, (cause, fixes) in cases.items():
        answer = answers.get(case_id)
        if answer is None:
            wrong.append(f"{case_id}: not diagnosed yet")
            continue
        if not (isinstance(answer, tuple | list) and len(answer) == 2):
            wrong.append(f"{case_id}: give a pair (cause, fix), got {answer!r}")
            continue
        got_cause, got_fix = answer
        bad = [f"{kind} {value!r} is not on the list" for kind, value, names in
               (("cause", got_cause, CAUSES), ("fix", got_fix, FIXES)) if value not in names]
        if bad:
            wrong.append(f"{case_id}: " + "; ".join(bad))
        elif got_cause != cause:
            wrong.append(f"{case_id}: not that cause; read the excerpt's first error line again")
        elif got_fix not in fixes:
            wrong.append(f"{case_id}: the cause is right, that fix does not remove it")
        else:
            right.append(f"{case_id}: {cause} -> {got_fix}")
    return wrong, right


def _report(ex: str, answers, cases: dict, hint: str) -> bool:
    if answers is None or answers is Ellipsis or answers == {}:
        return LAB.report(ex, False, f"not answered yet: no case diagnosed. Hint: {hint}")
    try:
        wrong, right = _grade(answers, cases)
    except TypeError as e:
        return LAB.report(ex, False, f"{e}. Hint: {hint}")
    if wrong:
        return LAB.report(ex, False, f"{len(right)} of {len(cases)} right; " + " | ".join(wrong) + f". Hint: {hint}")
    return LAB.report(ex, True, f"all {len(cases)} diagnosed:\n  " + "\n  ".join(right))


def check_quoted(diagnosis) -> bool:
    """Exercise 1: a (cause, fix) for every quoted case."""
    cases = {c.id: (c.cause, c.fixes) for c in QUOTED}
    return _report("ex1_quoted_cases", diagnosis, cases,
                   "the first ERROR/WARN line names the layer that failed (NCCL/OFI = network, ResourceLimitExceeded "
                   "= your account, CapacityError = AWS, ImportError = the image, a watchdog = a peer that did not come "
                   "in time: stuck, or busy alone for longer than the timeout); pick keys from "
                   "lab08b.show_lists()")


# ---------------------------------------------------------------- the live drills


@dataclass
class Drill:
    """One failure made to happen here: what the learner sees, and what actually happened."""

    id: str  # neutral: drill_1 ... drill_4, in the order shown
    what: str  # what was run, in words (not the fault: the learner works that out)
    log: list[str]  # the lines a person on call would read
    happened: str  # the cause, read back from the drill itself ("" when it did not reproduce)
    evidence: str  # how `happened` was established
    fixes: tuple[str, ...]
    nccl_words: str = ""  # what the same failure says on GPUs with NCCL, where gloo's words differ
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    made: str = ""  # which of DRILLS it is: the lab's bookkeeping (the learner reads the log, not this)


_KEEP = re.compile(r"error|timed out|connection closed|exitcode|SIGTERM|SIGKILL|Signal|rank\s+:", re.IGNORECASE)


def survivor_lines(text: str, limit: int = 12) -> list[str]:
    """What a person on call reads first: the error lines of the surviving ranks and torchrun, shortened; the
    victim's own `fault:` line (the answer), traceback frames and code lines left out."""
    out = []
    for raw in text.splitlines():
        line = re.sub(r"^\[rank\d+\]: ?", "", raw)
        summary = re.match(r"\s+(rank|exitcode)\s+:", line)  # torchrun's failure summary: who, and how
        if raw.startswith("fault:") or not _KEEP.search(line) or (
                line.startswith((" ", "\t", "Traceback")) and not summary):
            continue
        line = re.sub(r"\S*/site-packages/", ".../", line)
        for part in line.split(" Backend said: "):  # the engine's explanation, then gloo's own words
            out.append(part if len(part) <= 200 else part[:197] + "...")
    return out[:limit]


def traced_errors(folder: Path) -> list[str]:
    """The error each surviving rank recorded in its collective trace (rank-N.json's `failure`), first line,
    shortened. A survivor that torchrun stops before it prints (a dead peer: torchrun sends the others SIGTERM
    at once) leaves its own words only here."""
    out = []
    for path in sorted(Path(folder).glob("rank-*.json")) if Path(folder).is_dir() else []:
        try:
            trace = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        error = ((trace.get("failure") or {}).get("error") or "").splitlines()
        if error:
            said = re.sub(r"^\[\S*/gloo/", "[.../gloo/", error[0].split(" This is typically")[0])
            out.append(f"rank {trace.get('rank')} (its trace, {path.name}): {said}")
    return out


def _fault_line(text: str) -> str:
    return next((ln for ln in text.splitlines() if ln.startswith("fault:")), "")


def _train_args(data: str, checkpoints: Path) -> list[str]:
    """The two training drills run the same command; only the fault differs, and the log shows which."""
    return ["--model", "tiny", "--data", data, "--max-steps", str(STEPS), "--micro-batch", "2",
            "--warmup-steps", "1", "--log-every", "1", "--tensorboard", "false", "--checkpoint-every", "1",
            "--checkpoint-dir", str(checkpoints), "--collective-timeout", str(COLLECTIVE_TIMEOUT)]


_TRAINING = (f"2 processes training the tiny Llama: {STEPS} steps, a checkpoint every step, collective timeout "
             f"{COLLECTIVE_TIMEOUT} s")


def _hang_drill(data: str, base: Path, drill_id: str) -> Drill:
    from fmlab.train.local import torchrun_train

    run = torchrun_train(2, [*_train_args(data, base / "hang-ck"), "--fault", "hang", "--fault-step",
                             str(FAULT_STEP), "--fault-rank", "1"], base / "hang-out", timeout=DRILL_TIMEOUT)
    text = run.stdout + "\n" + run.stderr
    fault = _fault_line(text)
    timed_out = bool(re.search(r"timed out|Timed out waiting", text))
    happened = "hung_rank" if ("hangs" in fault and timed_out and run.returncode != 0) else ""
    return Drill(drill_id, _TRAINING, survivor_lines(text), happened,
                 f"the victim printed {fault!r}; the survivor timed out: {timed_out}; exit code {run.returncode}",
                 ("find_straggler",),
                 nccl_words="Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=ALLREDUCE, "
                            "Timeout(ms)=600000) ran for 600020 milliseconds before timing out (quoted case q04)",
                 seconds=run.seconds, extra={"traces": base / "hang-out" / "collective-traces"}, made="hang")


def _kill_drill(data: str, base: Path, drill_id: str) -> Drill:
    from fmlab.train.local import torchrun_train

    run = torchrun_train(2, [*_train_args(data, base / "kill-ck"), "--fault", "kill", "--fault-step",
                             str(FAULT_STEP), "--fault-rank", "1"], base / "kill-out", timeout=DRILL_TIMEOUT)
    text = run.stdout + "\n" + run.stderr
    fault = _fault_line(text)
    traces = base / "kill-out" / "collective-traces"
    traced = traced_errors(traces)  # torchrun stops the survivor before it prints: its words are in its trace
    closed = bool(re.search(r"Connection (closed|reset) by peer", text + "\n".join(traced)))
    happened = "dead_rank" if ("killed" in fault and run.returncode != 0) else ""
    return Drill(drill_id, _TRAINING, survivor_lines(text) + traced, happened,
                 f"the victim printed {fault!r}; the survivor saw the connection close or reset: {closed}; "
                 f"exit code {run.returncode}", ("restart_from_checkpoint",),
                 nccl_words="DistBackendError: NCCL error ... remote process exited or there was a network error "
                            "(ncclRemoteError; quoted case q06)",
                 seconds=run.seconds, extra={"checkpoints": base / "kill-ck", "traces": traces}, made="kill")


def _damage_drill(killed: Drill, base: Path, drill_id: str) -> Drill:
    from fmlab.checkpoint import complete_checkpoints, damage, newest_intact

    start = time.perf_counter()
    folder = base / "damaged-ck"
    shutil.copytree(killed.extra["checkpoints"], folder)
    saved = complete_checkpoints(folder)
    what = f"{killed.id}'s checkpoint folder, copied back as after a restart; a resume opens it"
    if not saved:
        return Drill(drill_id, what, [f"({killed.id} left no checkpoint)"], "", "no checkpoint to damage",
                     ("fallback_checkpoint",), made="damaged")
    newest = saved[-1]
    shard = sorted(newest.path.glob("*.distcp"))[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 3])  # as a copy cut short would leave it
    problems = damage(newest)
    chosen, notes = newest_intact(folder)
    lines = [f"resume: {note}" for note in notes] + [f"resume: resuming from {chosen.name if chosen else 'nothing'}"]
    happened = "damaged_checkpoint" if problems and chosen is not None and chosen != newest.path else ""
    return Drill(drill_id, f"{what} ({len(saved)} complete checkpoints)", lines, happened,
                 f"{newest.path.name}'s files checked against its marker: {'; '.join(problems) or 'intact'}",
                 ("fallback_checkpoint",), seconds=time.perf_counter() - start, made="damaged")


def _refused_drill(drill_id: str) -> Drill:
    from fmlab.jobs.request import capture_request
    from fmlab.jobs.spec import JobSpec
    from fmlab.sandbox.service import submit
    from fmlab.service.api_model import RequestInvalid

    start = time.perf_counter()
    spec = JobSpec("zoo-refused", distribution="torchrun", processes_per_host=8, instance_type="ml.p4d.24xlarge",
                   instance_count=16, hyperparameters={"model": "gpt-30b"})
    request = capture_request(spec).request
    # A month for a month-long run, in one job: SageMaker stops MaxRuntimeInSeconds at 28 days (fmlab.service.rules,
    # rule "max-runtime", from the API reference of StoppingCondition; the API model itself carries only min 1).
    request["StoppingCondition"]["MaxRuntimeInSeconds"] = MONTH_S
    try:
        name = submit(request, start=False)
        refused, lines = [], [f"the sandbox accepted the job {name}"]
    except RequestInvalid as e:
        refused = [p.field for p in e.problems]
        lines = [line for line in str(e).splitlines() if line.strip()]
    happened = "invalid_request" if refused else ""
    return Drill(drill_id, "a 16 x p4d CreateTrainingJob request for the 30B run, edited by hand before sending",
                 lines, happened, f"fields refused before anything ran: {', '.join(refused) or 'none'}",
                 ("fix_request",),
                 nccl_words="on AWS the same request fails in CreateTrainingJob itself (botocore raises a "
                            "ClientError): no job exists, nothing is billed",
                 seconds=time.perf_counter() - start, made="refused")


def drill_order(seed: int) -> list[str]:
    """The drills (DRILLS) in the order they are shown, drawn from `seed`: drill_1 is the first of them."""
    return random.Random(seed).sample(DRILLS, len(DRILLS))


def learner_seed(work: str | Path) -> int:
    """This learner's seed: drawn once at random and kept in `work`/drill-seed, so re-running the lab shows the
    same order, and two learners (or a copied answer) see different ones."""
    import secrets

    path = Path(work) / SEED_FILE
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        seed = secrets.randbelow(2**31)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{seed}\n")
        return seed


def run_drills(work: str | Path, seed: int | None = None) -> dict[str, Drill]:
    """Make four failures happen here and return what each showed and what actually happened, under neutral ids
    (drill_1 ...) in an order drawn from `seed` (default: the learner's own, `learner_seed(work)`)."""
    from fmlab.data import course_dataset

    seed = learner_seed(work) if seed is None else seed
    ids = {made: f"drill_{n}" for n, made in enumerate(drill_order(seed), 1)}
    base = fresh_folder(work, "drills")
    data = str(course_dataset(seq_len=128, vocab_size=512))
    hang, kill = _training_drills(data, base, ids)
    drills = [hang, kill, _damage_drill(kill, base, ids["damaged"]), _refused_drill(ids["refused"])]
    return {d.id: d for d in sorted(drills, key=lambda d: int(d.id.split("_")[1]))}


def _training_drills(data: str, base: Path, ids: dict[str, str]) -> tuple[Drill, Drill]:
    """The hang and kill drills (two torchrun runs, most of run_drills' time), made once per version of the course's
    code, data and PyTorch (build/cache/drills/<key>/, the way fmlab.train.cache keeps trained runs): the solved and
    unsolved labs and `make course` share one pair, copied into `base`. A pair that did not reproduce its failures
    is not kept, so the next call makes them again."""
    import hashlib
    import pickle
    from importlib.metadata import version

    from fmlab.environment import FileLock
    from fmlab.train.cache import CACHE, package_fingerprint

    material = {"fmlab": package_fingerprint(), "torch": version("torch"), "data": data, "ids": ids,
                "args": _train_args(data, Path("ck"))}
    entry = CACHE.parent / "drills" / hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]
    done = entry / "drills"
    if not done.is_dir():
        entry.mkdir(parents=True, exist_ok=True)
        with FileLock(entry / ".lock"):
            if not done.is_dir():  # another process may have made them while this one waited
                staging = fresh_folder(entry, ".staging")
                made = (_hang_drill(data, staging, ids["hang"]), _kill_drill(data, staging, ids["kill"]))
                if not all(d.happened for d in made):
                    shutil.copytree(staging, base, dirs_exist_ok=True)
                    return tuple(_moved(d, staging, base) for d in made)
                (staging / "drills.pickle").write_bytes(pickle.dumps([_moved(d, staging, Path()) for d in made]))
                staging.rename(done)
    shutil.copytree(done, base, dirs_exist_ok=True)
    return tuple(_moved(d, Path(), base) for d in pickle.loads((base / "drills.pickle").read_bytes()))


def _moved(drill: Drill, old: Path, new: Path) -> Drill:
    """The drill with the folders it names (checkpoints, traces) under `new` instead of `old`."""
    extra = {k: new / Path(v).relative_to(old) if isinstance(v, Path) else v for k, v in drill.extra.items()}
    return dataclasses.replace(drill, extra=extra)


def show_drills(drills: dict[str, Drill]) -> None:
    """Print what each drill showed: the log lines, and NCCL's words for the same failure where they differ."""
    for d in drills.values():
        print(f"=== {d.id}: {d.what} ({d.seconds:.1f} s)")
        for line in d.log:
            print(f"    | {line}")
        if d.nccl_words:
            print(f"    on GPUs (NCCL) the same failure reads: {d.nccl_words}")
        print()


def check_live(live_diagnosis, drills: dict[str, Drill]) -> bool:
    """Exercise 2: a (cause, fix) for every drill, checked against what the drill itself established."""
    ex = "ex2_live_drills"
    if not isinstance(drills, dict) or not all(isinstance(d, Drill) for d in drills.values()):
        return LAB.report(ex, False, "give the drills that lab08b.run_drills(work) returned")
    missing = [d.id for d in drills.values() if not d.happened]
    if missing:
        return LAB.report(ex, False, f"drills {', '.join(missing)} did not reproduce their failure here: "
                          + " | ".join(f"{d.id}: {d.evidence}" for d in drills.values() if not d.happened)
                          + ". Run lab08b.run_drills(work) again")
    cases = {d.id: (d.happened, d.fixes) for d in drills.values()}
    passed = _report(ex, live_diagnosis, cases,
                     "gloo's words differ from NCCL's (printed beside each drill), the failures do not; what does "
                     "the surviving rank say it waited for?")
    if passed:
        print("what actually happened:\n  " + "\n  ".join(f"{d.id}: {d.evidence}" for d in drills.values()))
    return passed


# ---------------------------------------------------------------- exercise 3: the hung rank, from traces


@dataclass
class TraceCase:
    """One set of collective traces (rank-N.json) and the truth: the rank the fault struck, the collective the
    others waited in (its number on the group) and the step."""

    id: str
    what: str
    folder: Path
    world: int
    rank: int
    seq: int
    step: int


def _seq_of(collective: str) -> int:
    return int(collective.split()[0].lstrip("#"))


def trace_cases(drills: dict[str, Drill], work: str | Path) -> dict[str, TraceCase]:
    """The traces the live drills' survivors wrote, and two more made here in seconds on forked gloo processes
    (fmlab.labs.hang_traces): a hung rank of 4 and a rank of 3 that skips an all-reduce. The collective number
    of the truth is the analyzer's (fmlab.hangs.analysis); the rank and the step are the fault's own."""
    from fmlab.hangs.analysis import analyze, load_traces
    from fmlab.labs.hang_traces import run_drill

    cases: dict[str, TraceCase] = {}
    for drill in drills.values():
        folder = drill.extra.get("traces")
        if drill.made not in ("hang", "kill") or folder is None or not Path(folder).is_dir():
            continue  # the survivor was stopped before it wrote a trace (a kill races torchrun's teardown)
        report = analyze(load_traces(folder), 2)
        if report.ranks == [1] and report.collective:
            cases[drill.id] = TraceCase(drill.id, f"exercise 2's {drill.id} (torchrun, 2 processes)", Path(folder),
                                        2, 1, _seq_of(report.collective), FAULT_STEP)
    base = fresh_folder(work, "traces")
    for case_id, kind, world, rank, step, what in (  # ids name the world, not the fault
            ("forked_4", "hang", 4, 3, 2, "4 forked gloo processes, 2 all-reduces per step"),
            ("forked_3", "skip", 3, 0, 3, "3 forked gloo processes, 2 all-reduces per step")):
        drill = run_drill(kind, base / case_id, world_size=world, rank=rank, step=step, timeout=2.0)
        if drill.report.ranks == [rank] and drill.report.collective:
            cases[case_id] = TraceCase(case_id, what, drill.folder, world, rank, _seq_of(drill.report.collective),
                                       step)
    return cases


def show_traces(cases: dict[str, TraceCase], last: int = 4) -> None:
    """Each case's traces: which ranks wrote one, and the newest `last` collectives of each."""
    from fmlab.hangs.analysis import load_traces

    for case in cases.values():
        traces = load_traces(case.folder)
        print(f"=== {case.id}: {case.what}; a world of {case.world}; traces from ranks {[t['rank'] for t in traces]}")
        for t in traces:
            for e in t["entries"][-last:]:
                print(f"    rank {t['rank']}  #{e['seq']:<3} {e['op']:<16} {str(e['sizes']):<12} group {e['group']}  "
                      f"step {e['step']}")
        print()


def check_traces(who_stopped, cases: dict[str, TraceCase]) -> bool:
    """Exercise 3: who_stopped(traces, world) -> (rank, collective number, step) for every case."""
    from fmlab.hangs.analysis import load_traces

    ex = "ex3_hung_rank_from_traces"
    hint = ("match collectives across ranks by their number on the group; a rank with no trace never entered the "
            "one the others waited in (their last); a rank whose collective #k carries a later step than the "
            "others' #k skipped their #k")
    if not cases:
        return LAB.report(ex, False, "no cases: run lab08b.trace_cases(drills, work) first")
    wrong, right = [], []
    for case in cases.values():
        try:
            got = who_stopped(load_traces(case.folder), case.world)
        except NotImplementedError:
            return LAB.report(ex, False, f"not answered yet: write who_stopped. Hint: {hint}")
        except Exception as e:  # noqa: BLE001  (the learner's code)
            wrong.append(f"{case.id}: who_stopped raised {type(e).__name__}: {e}")
            continue
        want = (case.rank, case.seq, case.step)
        if not (isinstance(got, tuple | list) and len(got) == 3):
            wrong.append(f"{case.id}: give (rank, collective number, step), got {got!r}")
        elif tuple(got) != want:
            named = [name for name, g, w in zip(("rank", "collective number", "step"), got, want, strict=True) if g != w]
            wrong.append(f"{case.id}: the {' and the '.join(named)} {'is' if len(named) == 1 else 'are'} not right")
        else:
            right.append(f"{case.id}: rank {case.rank} stopped at collective #{case.seq}, step {case.step}")
    if wrong:
        return LAB.report(ex, False, f"{len(right)} of {len(cases)} right; " + " | ".join(wrong) + f". Hint: {hint}")
    return LAB.report(ex, True, f"all {len(cases)} named:\n  " + "\n  ".join(right))


def summary() -> None:
    LAB.summary()
