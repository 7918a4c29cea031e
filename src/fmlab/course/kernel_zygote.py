"""The parent that notebook kernels are forked from: it imports torch, transformers, pandas, matplotlib, the
SageMaker SDK and the kernel's own machinery once, then forks a kernel for each request.

Started by fmlab.course.warm_kernels, not by hand: `python kernel_zygote.py SOCKET`. It listens on the Unix socket
SOCKET and lives until its stdin, a pipe from the process that started it, closes. A request carries the
kernel's command line, environment and folder, with its stdout and stderr as file descriptors. For each request
the zygote forks a keeper, which forks the kernel and reports on the request's connection:
`{"pid", "pgid", "forked", "differs", "zygote_cpu"}` first (the variables that kept it from forking, and the zygote's own
CPU seconds so far), then
`{"exit": code, "cpu": seconds}` when the kernel ends. If the connection closes first, the keeper kills the kernel's
process group.

A forked kernel shares these with its zygote, and a notebook cannot tell the difference:
- modules imported before any request, by imports that depend only on the environment and the files they read.
  fmlab is not preloaded, because it reads FMLAB_* variables, which differ from test to test. Three imports check
  whether they run in a kernel: matplotlib reads MPLBACKEND (set here as ipykernel sets it), tqdm.autonotebook
  checks for ipykernel (preloaded first, so it picks the notebook bars as a kernel does), and ipywidgets registers
  its comm target with a running kernel (done in the forked kernel once it runs). matplotlib's inline backend
  itself is imported by the first plot, in the kernel, as usual;
- the environment those imports read. A request whose environment differs from the zygote's in anything but the
  variables in PER_KERNEL (fmlab's, Jupyter's, the startup file, pytest's current test, those read only when
  used) is not forked: its kernel is started by exec, as jupyter_client would have started it. A test that sets
  HOME therefore gets a fresh interpreter;
- random state: Python's `random` reseeds itself in a forked child, numpy's global generator is reseeded here,
  and torch's default seed is the same fixed number in every process anyway.
"""

import gc
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import time
import traceback

_spec = importlib.util.spec_from_file_location("_fmlab_zygote", os.path.join(os.path.dirname(__file__), "..", "zygote.py"))
ZYGOTE = importlib.util.module_from_spec(_spec)  # fmlab/zygote.py, by path: the keeper's watch
_spec.loader.exec_module(ZYGOTE)

# The kernel itself, then the heavy modules most notebooks import in their first cells (~4 CPU s together).
PRELOAD = ("ipykernel.kernelapp", "ipykernel.ipkernel", "numpy", "pandas", "matplotlib", "matplotlib.pyplot",
           "torch", "torch.distributed", "transformers", "transformers.models.llama.modeling_llama",
           "safetensors.torch", "tokenizers", "boto3", "sagemaker.core.helper.session_helper",
           "sagemaker.core.resources", "sagemaker.train.model_trainer")
# Imported by a plot or by ipykernel's own set-up in a kernel; imported here, they would miss the running kernel.
NOT_PRELOADED = ("matplotlib_inline.backend_inline", "fmlab")
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"  # what ipykernel puts in MPLBACKEND when it is unset
# Variables a kernel may set differently from the zygote: nothing PRELOAD imports reads them when it loads.
PER_KERNEL_PREFIXES = ("FMLAB_", "JPY_", "PYDEVD_")
# Set in os.environ by code a test process runs, and read only when used, never on import: torch.compile writes its
# default cache folder (read when it compiles), fmlab.hangs.trace the Flight Recorder's variables (read when a
# process group is made: lab 08b sets them after importing torch and its forked ranks record), and
# fmlab.data.prepare tokenizers' parallelism (read when it encodes).
RUNTIME_ONLY = {"TORCHINDUCTOR_CACHE_DIR", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE",
                "TOKENIZERS_PARALLELISM"}
PER_KERNEL = {"PYTHONSTARTUP", "PYTEST_CURRENT_TEST", "PWD", "OLDPWD", "_", *RUNTIME_ONLY}
KEEPER_IGNORES = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # jupyter_client signals the kernel's group


def preload() -> None:
    import importlib

    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 10)  # as kernel_startup.py does in a kernel, for the same reason
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)  # matplotlib reads it on import
    sys.modules.setdefault("rfc3987_syntax", None)  # as fmlab/__init__.py does in every process that imports fmlab
    for name in PRELOAD:
        importlib.import_module(name)
    loaded = [name for name in NOT_PRELOADED if name in sys.modules]
    assert not loaded, f"preloading imported {loaded}, which must be imported in the kernel"
    gc.set_threshold(*thresholds)  # a kernel starts with Python's own, as a fresh one would
    gc.collect()
    gc.freeze()  # the imported objects stay for good: a kernel's collector need not walk them


def env_differences(base: dict, requested: dict) -> list[str]:
    """The variables (outside PER_KERNEL) that `requested` adds, drops or changes relative to `base`."""
    keys = set(base) | set(requested)
    return sorted(k for k in keys if base.get(k) != requested.get(k)
                  and k not in PER_KERNEL and not k.startswith(PER_KERNEL_PREFIXES))


def become_kernel(argv: list[str], env: dict, cwd: str, fds: list[int], forked: bool) -> None:
    """In the kernel's process: take the request's streams, folder and environment, then run ipykernel."""
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        os.close(fd)
    os.chdir(cwd)
    for signum in KEEPER_IGNORES:
        signal.signal(signum, signal.SIG_DFL)  # as a fresh process has them
    env = {**env, "JPY_PARENT_PID": str(os.getppid())}  # as jupyter_client sets it: the kernel exits with its keeper
    if not forked:
        os.execvpe(argv[0], argv, env)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # what Python installs at start
    os.environ.clear()
    os.environ.update(env)
    import importlib.util
    import tempfile

    tempfile.tempdir = None  # computed again from this kernel's TMPDIR
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()  # fresh entropy, as a new process draws; forked, it would repeat its siblings' numbers
    module = argv[argv.index("-m") + 1]
    sys.argv = [importlib.util.find_spec(module).origin, *argv[argv.index("-m") + 2:]]
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    # parent_handle's default was read from JPY_PARENT_PID when the zygote imported ipykernel: the keeper's pid
    app.initialize([*sys.argv[1:], f"--IPKernelApp.parent_handle={os.getppid()}"])
    widgets = sys.modules.get("ipywidgets")
    if widgets is not None:
        widgets.register_comm_target()  # what importing ipywidgets does in a running kernel
    app.start()
    sys.exit(0)


def keep(conn: socket.socket, request: dict, fds: list[int], base_env: dict, zygote_cpu: float) -> None:
    """In the keeper's process: fork the kernel, report it, then report its exit, or kill it if the caller goes."""
    os.setsid()  # the kernel and everything it starts form one process group, signalled as a whole
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for signum in KEEPER_IGNORES:  # meant for the kernel; the keeper stays to report how it ended
        signal.signal(signum, signal.SIG_IGN)
    differs = env_differences(base_env, request["env"])
    forked = not differs
    pid = os.fork()
    if pid == 0:
        conn.close()
        try:
            become_kernel(request["argv"], request["env"], request["cwd"], fds, forked)
        except SystemExit:
            raise  # the kernel ended: the interpreter exits as a kernel's does, atexit handlers and all
        except BaseException:
            traceback.print_exc()
            os._exit(1)
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid, "pgid": os.getpgid(0), "forked": forked, "differs": differs,
                             "zygote_cpu": zygote_cpu}).encode())
    ZYGOTE.watch(conn, pid)  # the kernel shares the keeper's group: the keeper goes too if the caller does


def reap() -> None:
    """Wait for the keepers that have ended, so that their kernels' CPU counts in this process's children."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def serve(path: str) -> None:
    base_env = dict(os.environ)
    preload()
    listener = ZYGOTE.listen(path)
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [], 1.0)
        reap()
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return  # the process that started the zygote is gone
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
        zygote_cpu = time.process_time()
        if os.fork() == 0:
            listener.close()
            # the keeper and its kernel read nothing: /dev/null, never a closed descriptor 0, which the next file
            # the kernel or a daemon it starts opens would take (and a daemonizing slurmd then points at /dev/null)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            keep(conn, json.loads(message), fds, base_env, zygote_cpu)
        conn.close()
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    # this file's folder (fmlab/course) must not shadow top-level modules; ipykernel_launcher drops its own
    # sys.path[0] (the kernel's folder) too, and IPython adds '' before site-packages when the kernel starts
    del sys.path[0]
    serve(sys.argv[1])
