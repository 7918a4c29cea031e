"""fmlab.train.handoff and worker_zygote: a training worker forked from a pre-imported parent is the worker a fresh
interpreter would have been, and its entry script ends as the worker ends.

A probe entry script hands over as entrypoints/train.py does, then records what a worker can see of its process.
The same probe runs fresh (FMLAB_WORKER_ZYGOTES unset) and forked, and the records must agree but for the pid and
the random draws.

Run: .venv/bin/pytest tests/train/test_worker_zygote.py -q   (about 25 s)
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from fmlab.train import handoff

pytestmark = [pytest.mark.distributed, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux")]

PROBE = """
import gc, sys
gc.disable()
from fmlab.train.handoff import handoff
if __name__ == "__main__":
    handoff()

preloaded = sorted(sys.modules)  # forked: what the zygote imported (and this script so far)
import json, os, random, signal, time
import numpy, torch

mode = sys.argv[1]
if mode == "ok":  # what a training worker imports before its first step
    import fmlab.train.loop, fmlab.models
    fmlab.models.build_model("tiny")
record = {
    "pid": os.getpid(), "random": random.random(), "numpy": float(numpy.random.rand()),
    "session_leader": os.getsid(0) == os.getpid(), "cwd": os.getcwd(), "argv": sys.argv,
    "orig_argv": sys.orig_argv[1:], "path": sys.path, "umask": os.umask(0o22),
    "env": {k: os.environ.get(k) for k in ("FMLAB_PROBE_VALUE", "RANK", "FMLAB_WORKER_ZYGOTES")},
    "fds": sorted(os.listdir("/proc/self/fd")), "stdin": os.readlink("/proc/self/fd/0"),
    "stdout_unbuffered": sys.stdout.write_through, "sighup_ignored": signal.getsignal(signal.SIGHUP) == signal.SIG_IGN,
    "sigint": str(signal.getsignal(signal.SIGINT)), "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "main": sorted(k for k in globals() if k.startswith("__")), "file": __file__, "spec": repr(__spec__),
    "gc_enabled": gc.isenabled(), "threads": torch.get_num_threads(), "tmp": __import__("tempfile").gettempdir(),
    "preloaded": preloaded, "modules": sorted(sys.modules),
}
gc.enable()
print(json.dumps(record), flush=True)
if mode == "exit":
    sys.exit(3)
if mode == "raise":
    raise ValueError("the probe's own failure")
if mode == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "wait":
    def stop(signum, frame):
        print("stopped by", signal.Signals(signum).name, flush=True)
        sys.exit(7)
    signal.signal(signal.SIGTERM, stop)
    time.sleep(60)
"""


def start(tmp_path: Path, mode: str, forked: bool) -> subprocess.Popen:
    probe = tmp_path / "probe" / "probe.py"
    probe.parent.mkdir(exist_ok=True)
    probe.write_text(PROBE)
    # per-worker variables only (fmlab's, torchrun's): the probe forks from the zygote the training tests use
    env = {**os.environ, "FMLAB_PROBE_VALUE": "seen", "RANK": "1", "OMP_NUM_THREADS": "1"}
    if not forked:
        env.pop(handoff.VARIABLE, None)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-u", str(probe), mode], cwd=work, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def run(tmp_path: Path, mode: str, forked: bool) -> tuple[dict, subprocess.CompletedProcess]:
    proc = start(tmp_path, mode, forked)
    out, err = proc.communicate(timeout=180)
    record = json.loads(out.splitlines()[0]) if out else {}
    return record, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(scope="module")
def zygotes():
    """The test run's zygote folder (tests/conftest.py), where the forked probes' zygote lives."""
    if handoff.VARIABLE not in os.environ:
        pytest.skip("FMLAB_WARM_WORKERS=0: no worker is forked in this run")
    return Path(os.environ[handoff.VARIABLE])


def test_a_forked_worker_sees_what_a_fresh_one_sees_but_its_pid_and_random_draws(tmp_path, zygotes):
    fresh, _ = run(tmp_path, "ok", forked=False)
    first, done = run(tmp_path, "ok", forked=True)
    second, _ = run(tmp_path, "ok", forked=True)
    assert done.returncode == 0, done.stderr
    assert fresh["env"][handoff.VARIABLE] is None and first["env"][handoff.VARIABLE] == str(zygotes)
    for record in (fresh, first, second):
        record["env"].pop(handoff.VARIABLE)
    differ = {"pid", "random", "numpy"}
    same = {k: v for k, v in fresh.items() if k not in differ | {"preloaded", "modules"}}
    assert {k: v for k, v in first.items() if k in same} == same
    for key in differ:
        assert len({fresh[key], first[key], second[key]}) == 3, key
    # the zygote imports nothing a fresh worker would not have imported by its first step
    extra = set(first["preloaded"]) - set(fresh["modules"]) - {handoff.ZYGOTE_MODULE, "_fmlab_zygote"}
    assert "torch" in first["preloaded"] and not extra, f"preloaded but never imported fresh: {sorted(extra)[:20]}"
    assert first["fds"] == ["0", "1", "2", "3"]  # 3: the listing's own descriptor; nothing of the zygote's is open
    assert first["session_leader"] and first["stdout_unbuffered"] and first["stdin"] == "/dev/null"


def test_the_entry_script_ends_as_its_worker_ends(tmp_path, zygotes):
    record, exited = run(tmp_path, "exit", forked=True)
    assert exited.returncode == 3 and record["pid"] != 0
    _, raised = run(tmp_path, "raise", forked=True)
    assert raised.returncode == 1 and "ValueError: the probe's own failure" in raised.stderr
    _, killed = run(tmp_path, "kill", forked=True)
    assert killed.returncode == -signal.SIGKILL  # what torchrun reports as "Signal 9 (SIGKILL) received"


def _gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1][0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_torchruns_signals_reach_the_worker_and_a_killed_entry_script_takes_its_worker_along(tmp_path, zygotes):
    proc = start(tmp_path, "wait", forked=True)
    worker = json.loads(proc.stdout.readline())["pid"]
    assert worker != proc.pid
    # nothing below the entry script: killing a job's process tree never reaches the zygote or its other workers
    assert psutil.Process(proc.pid).children(recursive=True) == []
    os.killpg(proc.pid, signal.SIGTERM)  # how torchrun stops its workers: the worker's own handler runs
    assert proc.wait(30) == 7 and proc.stdout.read() == "stopped by SIGTERM\n" and _gone(worker)

    proc = start(tmp_path, "wait", forked=True)
    worker = json.loads(proc.stdout.readline())["pid"]
    os.kill(proc.pid, signal.SIGKILL)  # torchrun's last resort: nobody can forward it
    assert proc.wait(30) == -signal.SIGKILL
    assert _gone(worker)


def test_only_the_variables_nothing_preloaded_reads_may_differ_between_a_worker_and_its_zygote():
    assert handoff.is_per_worker("RANK") and handoff.is_per_worker("SM_HOSTS") and handoff.is_per_worker("FMLAB_X")
    assert not handoff.is_per_worker("OMP_NUM_THREADS")  # libgomp reads it when torch loads
    assert not handoff.is_per_worker("HOME")  # huggingface_hub derives its cache folder from it on import
    assert not handoff.is_per_worker("PYTHONHASHSEED")


def test_two_forked_ranks_train_exactly_as_two_fresh_ones(tmp_path, zygotes, monkeypatch):
    from fmlab.train.local import torchrun_train

    args = ["--model", "tiny", "--max-steps", "4", "--log-every", "1", "--sharding", "full"]
    forked = torchrun_train(2, args, tmp_path / "forked").check()
    monkeypatch.delenv(handoff.VARIABLE)
    fresh = torchrun_train(2, args, tmp_path / "fresh").check()
    assert [m["loss"] for m in forked.metrics] == [m["loss"] for m in fresh.metrics]
    assert len(forked.metrics) == 4


def test_a_signal_that_comes_before_the_worker_waits_for_it_or_returns_to_the_entry_script():
    """The stand-in's handlers exist before the worker does: torchrun may stop its workers a moment after starting
    them (a flake of the test above on a loaded machine, before the handlers came first)."""
    seen = []
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: seen.append(signum))
    try:
        early = handoff.Forwarder()
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR2)
        assert early.waiting == [signal.SIGUSR1, signal.SIGUSR2] and seen == []
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        early.start(worker.pid)  # both go to the worker's group, in order: SIGUSR1 kills it
        assert worker.wait(30) == -signal.SIGUSR1 and early.waiting == []
        early.give_up()

        late = handoff.Forwarder()  # no worker came: the entry script meets the signal itself, as it was set up
        os.kill(os.getpid(), signal.SIGUSR2)
        late.give_up()
        assert seen == [signal.SIGUSR2]
        assert signal.getsignal(signal.SIGTERM) != late.forward
    finally:
        signal.signal(signal.SIGUSR2, previous)
