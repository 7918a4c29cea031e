"""fmlab.environment.kill_process_tree: a launcher killed on a timeout takes its workers with it, frozen ones too.

Run: .venv/bin/pytest tests/test_kill_process_tree.py -q   (about 1 s)
"""

import os
import subprocess
import sys
import time

import pytest

from fmlab.environment import kill_process_tree

# A launcher shaped like torchrun: it starts a worker in a session of its own, the worker freezes (SIGSTOP), and
# the launcher prints the worker's pid and waits.
LAUNCHER = """
import os, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSTOP)"],
                          start_new_session=True)
print(worker.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_frozen_worker_in_its_own_session_dies_with_its_launcher():
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
    worker = int(launcher.stdout.readline())
    try:
        assert os.getpgid(worker) != os.getpgid(launcher.pid)  # killpg(launcher) alone would miss it
        kill_process_tree(launcher.pid)
        launcher.wait(10)
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker)
    finally:
        for pid in (worker, launcher.pid):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
