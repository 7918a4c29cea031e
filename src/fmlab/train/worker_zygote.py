"""The parent that training workers are forked from when a test run asks for it (fmlab.train.handoff): it imports
torch, torch.distributed and transformers once, then forks a worker for each entry script that hands itself over.

A training worker spends ~3.3 CPU s importing those before its first step, and the test suite starts about 100
workers (torchrun's, the sandbox's, the notebooks'). Started by fmlab.train.handoff, never by hand, as
`python [the worker's interpreter options] -c BOOT SOCKET THIS_FILE` (BOOT loads this file by path, under the name
`_fmlab_worker_zygote`, so that fmlab itself is never imported here). It listens on the Unix socket SOCKET, and
ends once the socket is gone (the run that asked for it removed its folder) or after IDLE_SECONDS without a
request and without a worker.

For each request the zygote forks a keeper, which forks the worker and reports on the request's connection:
`{"pid": pid}` once the worker leads a session of its own, then `{"exit": code, "cpu": seconds}` when it ends.
If the connection closes first (its entry script was killed), the keeper kills the worker's process group.

What a forked worker shares with this parent, and why the worker cannot tell:
- the modules in PRELOAD, imported with the environment and interpreter options of the worker (handoff starts a
  zygote per distinct set of them, the variables in handoff.PER_WORKER aside, which nothing here reads on import);
  fmlab is not preloaded (it reads FMLAB_* and SM_* variables), and test_worker_zygote checks that PRELOAD imports
  nothing a fresh worker would not;
- random state: Python's `random` reseeds itself in a forked child, numpy's global generator is reseeded here, and
  torch's default seed is the same fixed number in every process anyway. Python's string hashing secret is the
  zygote's: workers forked from one zygote iterate a set of strings in the same order, where fresh ones may not.
The worker gets its entry script's argv, sys.path, environment, folder, umask, signal mask and ignored signals,
its descriptors 0-2 (the others closed, as torchrun's Popen closes them), and runs the script as `python script`
or `python -m module` would, in a fresh __main__ namespace.
"""

import atexit
import builtins
import gc
import importlib
import importlib.machinery
import importlib.util
import json
import os
import runpy
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback

_spec = importlib.util.spec_from_file_location("_fmlab_zygote", os.path.join(os.path.dirname(__file__), "..", "zygote.py"))
ZYGOTE = importlib.util.module_from_spec(_spec)  # fmlab/zygote.py, by path: the keeper's watch
_spec.loader.exec_module(ZYGOTE)

# What `import fmlab.train.loop` and a Llama model's construction import, fmlab aside (3.2 of the 3.3 CPU s).
PRELOAD = ("numpy", "torch", "torch.distributed", "torch.distributed.checkpoint", "torch.distributed.fsdp",
           "torch.distributed.tensor", "transformers", "transformers.models.llama.modeling_llama",
           "safetensors.torch", "tokenizers")
NOT_PRELOADED = ("fmlab",)
IDLE_SECONDS = 60.0
MAX_FDS = 3  # stdin, stdout, stderr
LEDGER = "cpu.jsonl"  # beside the sockets: a line per zygote and per forked worker that ended, with its CPU seconds


def preload() -> None:
    gc.disable()  # as the entry scripts do while they import (fmlab.train.collector)
    sys.modules.setdefault("rfc3987_syntax", None)  # as fmlab/__init__.py does in every process that imports fmlab
    for name in PRELOAD:
        importlib.import_module(name)
    loaded = [name for name in NOT_PRELOADED if name in sys.modules]
    assert not loaded, f"preloading imported {loaded}, which a worker must import itself"
    gc.enable()
    gc.collect()
    gc.freeze()  # the imported objects stay for good: a worker's collector need not walk them


def fresh_main(request: dict) -> dict:
    """The __main__ namespace as the interpreter makes it, before a script or a module runs in it."""
    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(__name__="__main__", __doc__=None, __package__=None, __spec__=None, __annotations__={},
                __builtins__=builtins, __loader__=importlib.machinery.BuiltinImporter)
    if "script" in request:
        main.update(__file__=request["script"], __cached__=None,
                    __loader__=importlib.machinery.SourceFileLoader("__main__", request["script"]))
    return main


def run_main(request: dict) -> tuple[int, int | None]:
    """Run the script or module as the interpreter's main program: the exit code it would have had, and the signal
    it would have died of instead (an uncaught KeyboardInterrupt), if any."""
    main = fresh_main(request)
    try:
        if "script" in request:
            with open(request["script"], "rb") as f:
                source = f.read()
            exec(compile(source, request["script"], "exec"), main)
        else:
            runpy._run_module_as_main(request["module"], alter_argv=False)  # what `python -m` calls
        code, die_of = 0, None
    except SystemExit as stop:
        code, die_of = (stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1), None
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code, die_of = 1, signal.SIGINT  # Python reports an uncaught Ctrl-C by dying of SIGINT
    except BaseException:  # noqa: BLE001 - printed and turned into exit code 1, as the interpreter does
        sys.excepthook(*sys.exc_info())
        code, die_of = 1, None
    threading._shutdown()  # what the interpreter does at exit: wait for non-daemon threads, then atexit
    atexit._run_exitfuncs()
    return code, die_of


def become_worker(request: dict, fds: list[int], ready: int) -> None:
    """In the worker's process: take the entry script's session, descriptors, folder, signals and environment."""
    os.setsid()  # as torchrun starts its workers (start_new_session), and the keeper may kill the whole group
    os.close(ready)  # tells the keeper that the group exists
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 1024)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    for signum in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}:
        if signum in request["ignored"]:
            signal.signal(signum, signal.SIG_IGN)
        elif signum == signal.SIGINT:
            signal.signal(signum, signal.default_int_handler)
        elif signum not in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these two itself at start
            signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, request["blocked"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv[:] = request["argv"]
    sys.orig_argv[:] = request["orig_argv"]
    sys.path[:] = request["path"]
    tempfile.tempdir = None  # computed again from this worker's TMPDIR
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()  # fresh entropy, as a new process draws; forked, it would repeat its siblings' numbers
    code, die_of = run_main(request)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if die_of is not None:
        signal.signal(die_of, signal.SIG_DFL)
        os.kill(os.getpid(), die_of)
    os._exit(code & 0xFF)


def keep(conn: socket.socket, request: dict, fds: list[int], ledger: str) -> None:
    """In the keeper's process: fork the worker, report it, then report its end, or kill it if the caller goes."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        conn.close()
        try:
            become_worker(request, fds, ready_w)
        finally:
            os._exit(1)  # become_worker never returns; a failure before the script ran lands here
    os.close(ready_w)
    for fd in fds:
        os.close(fd)
    os.read(ready_r, 1)  # end of file once the worker has its session (or died before)
    os.close(ready_r)
    conn.sendall(json.dumps({"pid": pid}).encode())

    def count(cpu: float) -> None:
        with open(ledger, "a") as f:  # one short line in append mode: lines of concurrent keepers never mix
            f.write(json.dumps({"cpu": round(cpu, 3), "test": request["env"].get("PYTEST_CURRENT_TEST")}) + "\n")

    ZYGOTE.watch(conn, pid, count)


def serve(path: str) -> None:
    with open(path.removesuffix(".sock") + ".pid", "w") as f:
        f.write(str(os.getpid()))  # for its starter, which waits for the socket while this process lives
    del sys.path[0]  # '' from `python -c`: the zygote's folder must not shadow modules; a worker gets its own path
    preload()
    listener = ZYGOTE.listen(path)
    ledger = os.path.join(os.path.dirname(path), LEDGER)
    with open(ledger, "a") as f:  # its imports, counted once
        f.write(json.dumps({"cpu": round(time.process_time(), 3), "zygote": True}) + "\n")
    keepers: set[int] = set()
    last = time.monotonic()
    while os.path.exists(path):
        ready, _, _ = select.select([listener], [], [], 1.0)
        for pid in list(keepers):
            if os.waitpid(pid, os.WNOHANG)[0]:
                keepers.discard(pid)
        if not ready:
            if not keepers and time.monotonic() - last > IDLE_SECONDS:
                break
            continue
        conn, _ = listener.accept()
        last = time.monotonic()
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, MAX_FDS)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            try:
                keep(conn, json.loads(message), fds, ledger)
            except BaseException:  # noqa: BLE001 - the keeper must never return into the zygote's loop
                traceback.print_exc()
            os._exit(1)
        keepers.add(pid)
        conn.close()
        for fd in fds:
            os.close(fd)
    listener.close()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
