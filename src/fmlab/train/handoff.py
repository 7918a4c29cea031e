"""An entry script hands its process over to a worker forked from a pre-imported parent, when the run asks for it.

    FMLAB_WORKER_ZYGOTES=<folder>   set by the test suite (tests/conftest.py calls enable()); unset, nothing happens
    FMLAB_WARM_WORKERS=0            enable() does nothing: every worker of the test suite imports for itself

The first lines of entrypoints/train.py and `python -m fmlab.train` call `handoff()` before importing torch. With
the variable set, the script asks a zygote (fmlab.train.worker_zygote, one per distinct interpreter, sys.path and
environment, started here on first use) to fork a worker that runs this same script with this process's argv,
environment, folder and descriptors 0-2. This process then stays as the worker's stand-in, so that whoever started
it (torchrun, the sandbox, a test) sees what it would have seen:
- a signal it receives (torchrun's SIGTERM to the group) goes to the worker's process group;
- it ends as the worker ends: the same exit code, or the same signal (a rank that killed itself with SIGKILL);
- if it is killed (torchrun's SIGKILL), its connection closes and the worker's keeper kills the worker's group.
A worker starts in ~0.1 CPU s instead of ~3.3 (torch, torch.distributed, transformers). What a forked worker shares
with its zygote, and why it cannot tell, is in worker_zygote's docstring. Anything that keeps it
from handing over (no zygote could start, a terminal on a descriptor, an option the zygote would not share) leaves
the script to import and run as usual, so a run never fails for it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIABLE = "FMLAB_WORKER_ZYGOTES"
ZYGOTE_FILE = Path(__file__).with_name("worker_zygote.py")
ZYGOTE_MODULE = "_fmlab_worker_zygote"
# The zygote leaves its starter at once (a fork whose parent exits): no entry script is its parent, so killing a
# job's process tree (fmlab.environment.kill_process_tree, psutil's descendants) never reaches the zygote, nor the
# workers of other jobs forked from it.
BOOT = ("import os, sys\nif os.fork(): os._exit(0)\n"
        f"import importlib.util; s = importlib.util.spec_from_file_location({ZYGOTE_MODULE!r}, sys.argv[2]); "
        "m = importlib.util.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); "
        "del s; m.serve(sys.argv[1])")
# Variables a worker may have and its zygote not, because nothing the zygote imports (worker_zygote.PRELOAD) reads
# them on import: torchrun's per-worker ones, SageMaker's and the sandbox's, fmlab's (fmlab is not preloaded),
# Jupyter's (a notebook's kernel starts the job), pytest's, and a few read only when used.
PER_WORKER = {"RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
              "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
              "TRAINING_JOB_NAME", "MPLBACKEND", "PWD", "OLDPWD", "_", "TORCHINDUCTOR_CACHE_DIR",
              "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE"}
PER_WORKER_PREFIXES = ("FMLAB_", "SM_", "TORCHELASTIC_", "JPY_", "PYDEVD_", "PYTEST_")
START_TIMEOUT = 120.0  # seconds a zygote may take to import (~3.3 CPU s, much longer on a loaded machine)
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def enable() -> Path | None:
    """For a run of many workers (the test suite): a new folder for zygotes, named in this process's environment
    so that every worker started below it hands over; None where FMLAB_WARM_WORKERS=0 turns it off. The zygotes end
    within a second of disable(folder)."""
    if os.environ.get("FMLAB_WARM_WORKERS", "1") == "0":
        return None
    folder = Path(tempfile.mkdtemp(prefix="fmlab-workers-"))  # short: a socket's path has at most 107 bytes
    os.environ[VARIABLE] = str(folder)
    return folder


def disable(folder: Path | None) -> None:
    if folder is None:
        return
    if os.environ.get(VARIABLE) == str(folder):
        del os.environ[VARIABLE]
    shutil.rmtree(folder, ignore_errors=True)


def ledger(folder: Path | None) -> list[dict]:
    """The zygotes' ledger: a line per zygote (its imports, `"zygote": true`) and per forked worker that ended, with
    its CPU seconds. They belong to no process that waits for them, so resource.RUSAGE_CHILDREN never sees them."""
    try:
        lines = (folder / "cpu.jsonl").read_text().splitlines() if folder else []
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.endswith("}")]


def ledger_cpu(folder: Path | None) -> float:
    return sum(line["cpu"] for line in ledger(folder))


def is_per_worker(name: str) -> bool:
    return name in PER_WORKER or name.startswith(PER_WORKER_PREFIXES)


def interpreter_options() -> list[str] | None:
    """The options this interpreter was started with (`-u`, `-X ...`), or None if its command line is not the
    `python [options] script args` or `python [options] -m module args` a zygote can reproduce."""
    tail = len(sys.argv) + (1 if sys.modules["__main__"].__spec__ is not None else 0)
    options = sys.orig_argv[1:len(sys.orig_argv) - tail]
    if len(sys.orig_argv) - tail < 1 or any(option in ("-c", "-m", "-") for option in options):
        return None
    return options


def zygote_key(options: list[str], env: dict[str, str]) -> str:
    """What a worker must share with its zygote: interpreter, options, path, the environment the imports read,
    resource limits, signal mask and ignored signals (all inherited by a fresh process)."""
    limits = [resource.getrlimit(getattr(resource, name)) for name in
              ("RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_STACK", "RLIMIT_CORE", "RLIMIT_NPROC")]
    facts = [sys.executable, sys.version, options, sys.path[1:], sorted(env.items()), limits,
             sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])), ignored_signals()]
    return hashlib.sha256(json.dumps(facts, default=str).encode()).hexdigest()[:16]


def ignored_signals() -> list[int]:
    """The signals this process ignores because it was started with them ignored (Python ignores SIGPIPE and
    SIGXFSZ itself, so those two say nothing)."""
    return sorted(int(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE,
                                                                      signal.SIGXFSZ)
                  and signal.getsignal(s) == signal.SIG_IGN)


def connect(folder: Path, key: str, options: list[str], env: dict[str, str]) -> socket.socket:
    """A connection to the zygote for `key`, started first if there is none (one starter at a time)."""
    path = folder / f"{key}.sock"
    try:
        return _connected(path)
    except OSError:
        pass
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _connected(path)
        except OSError:
            pass
        path.unlink(missing_ok=True)  # a zygote that was killed leaves its socket behind
        pid_file = folder / f"{key}.pid"
        pid_file.unlink(missing_ok=True)
        with open(folder / f"{key}.log", "ab") as log:
            subprocess.run([sys.executable, *options, "-c", BOOT, str(path), str(ZYGOTE_FILE)], env=env, cwd=folder,
                           stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, check=True)
        deadline = time.monotonic() + START_TIMEOUT
        while not path.exists():
            if time.monotonic() > deadline or (pid_file.exists() and not _alive(pid_file)):
                raise OSError(f"the worker zygote did not start (see {folder / f'{key}.log'})")
            time.sleep(0.02)
        return _connected(path)


def _alive(pid_file: Path) -> bool:
    text = pid_file.read_text()
    if not text:
        return True  # written this moment
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _connected(path: Path) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        raise
    return conn


def request() -> dict:
    main = sys.modules["__main__"]
    where = ({"module": main.__spec__.name.removesuffix(".__main__")} if main.__spec__ is not None
             else {"script": os.path.abspath(main.__file__)})
    return {**where, "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path, "env": dict(os.environ),
            "cwd": os.getcwd(), "umask": _umask(), "ignored": ignored_signals(),
            "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class Forwarder:
    """The stand-in's signal handlers, installed before the worker exists: a signal that arrives while the worker is
    being forked (torchrun stopping its workers a moment after starting them) waits for the worker's pid, then goes
    to its group like the rest. If no worker comes, the handlers are put back and the waiting signals delivered to
    this process, which then meets them as a fresh worker would have."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.waiting: list[int] = []
        self.previous = {signum: signal.getsignal(signum) for signum in FORWARDED}
        for signum, handler in self.previous.items():
            if handler != signal.SIG_IGN:
                signal.signal(signum, self.forward)

    def forward(self, signum, _frame) -> None:
        if self.pid is None:
            self.waiting.append(signum)
            return
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass

    def start(self, pid: int) -> None:
        self.pid = pid
        while self.waiting:
            self.forward(self.waiting.pop(0), None)

    def give_up(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        for signum in self.waiting:
            os.kill(os.getpid(), signum)


def handoff() -> None:
    """Hand this process over to a forked worker and end as it ends; return (do nothing) where it cannot."""
    folder = os.environ.get(VARIABLE)
    if not folder or ZYGOTE_MODULE in sys.modules or not sys.platform.startswith("linux"):
        return  # not asked, already the forked worker, or no pidfd/SEQPACKET here
    options = interpreter_options()
    if options is None or any(os.isatty(fd) for fd in (0, 1, 2)):
        return  # a terminal's line buffering is decided when the interpreter starts: the zygote's has none
    env = {k: v for k, v in os.environ.items() if not is_per_worker(k)}
    ask = request()  # before the handlers change: the worker gets this process's signal dispositions
    forwarder = Forwarder()
    try:
        conn = connect(Path(folder), zygote_key(options, env), options, env)
        socket.send_fds(conn, [json.dumps(ask).encode()], [0, 1, 2])
        started = conn.recv(1 << 16)
    except OSError:
        forwarder.give_up()
        return  # no zygote (its folder gone, its start failed): this process imports and runs the script itself
    if not started:
        conn.close()
        forwarder.give_up()
        return  # the zygote ended before it forked (idle, or its run is over)
    forwarder.start(json.loads(started)["pid"])
    stand_in(conn)


def stand_in(conn: socket.socket) -> None:
    """Wait, forwarding signals (Forwarder), until the worker ends, then end the same way. Never returns."""
    message = conn.recv(1 << 16)  # retried after each forwarded signal (PEP 475)
    code = json.loads(message)["exit"] if message else 1  # no message: the keeper was killed, say failure
    if code < 0:  # the worker died of a signal: die of the same one, as torchrun and the sandbox would have seen
        if -code != signal.SIGKILL:  # SIGKILL can be neither blocked nor handled
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)
