"""Notebook kernels forked from a pre-imported parent (kernel_zygote.py) instead of started from nothing.

    from fmlab.course.warm_kernels import WarmKernelManager
    papermill.execute_notebook(src, out, kernel_manager_class=WarmKernelManager)   # what run.execute does

Why: a kernel spends ~7 CPU s importing torch, transformers, pandas, matplotlib and the SageMaker SDK before the
notebook's first line does anything (benchmarks/warm_kernels.py: 7.13 CPU s fresh, 0.62 forked, 2026-11-27), and
the test suite and `make course` start ~75 of them. The zygote pays that once per process
that runs notebooks; each kernel forked from it starts with those modules loaded, in its own process, folder and
environment, with the notebook run top to bottom as before. A kernel the zygote cannot fork faithfully (an
environment that changes what those imports read) is started by exec, like jupyter_client's own kernels.

FMLAB_WARM_KERNELS=0 turns it off: every kernel is then jupyter_client's usual process.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning.local_provisioner import LocalProvisioner

ZYGOTE = Path(__file__).with_name("kernel_zygote.py")
# The zygote's environment: this process's when it first imported this module (the test suite's conftest imports
# it before any test changes a variable), so a variable a test sets for its own kernel is not baked into the rest.
ENVIRONMENT = dict(os.environ)
STARTUP_TIMEOUT = 120.0  # seconds for the zygote's imports on a loaded 2-core machine (~8 s when quiet)


def enabled() -> bool:
    return os.environ.get("FMLAB_WARM_KERNELS", "1") != "0"


class KernelCounts:
    """What this process's warm kernels did: how many were forked or exec'd, and the CPU seconds of the zygote and
    of the kernels that ended (their processes are the zygote's, so this process's resource usage lacks them)."""

    def __init__(self) -> None:
        self.forked = 0
        self.execed = 0  # started by the zygote with exec: an environment it could not fork faithfully
        self.exec_reasons: set[str] = set()  # the variables that made it so
        self.unforked = 0  # started without the zygote, which could not serve
        self.cpu = 0.0


counts = KernelCounts()


class Zygote:
    """The zygote process of this process, started on first use and stopped at exit."""

    _lock = threading.Lock()
    _instance: Zygote | None = None

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="fmlab-zygote-"))
        self.socket = self.folder / "socket"
        self.reported_cpu = 0.0  # the zygote's own CPU seconds, as far as counts.cpu has them
        read_end, keepalive = os.pipe()  # the zygote exits when this process's end closes
        self._keepalive: int | None = keepalive
        self.process = subprocess.Popen([sys.executable, str(ZYGOTE), str(self.socket)], stdin=read_end,
                                        env=ENVIRONMENT, start_new_session=True)
        os.close(read_end)
        atexit.register(self.stop)

    @classmethod
    def get(cls) -> Zygote:
        with cls._lock:
            if cls._instance is None or cls._instance.process.poll() is not None:
                if cls._instance is not None:
                    cls._instance.stop()  # it exited: release its pipe and folder before a new one starts
                cls._instance = cls()
            return cls._instance

    def connect(self) -> socket.socket:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self.socket.exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"the kernel zygote exited with code {self.process.returncode} before serving")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the kernel zygote did not serve within {STARTUP_TIMEOUT:.0f} s")
            time.sleep(0.05)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(str(self.socket))
        return conn

    def stop(self) -> None:
        """Close the zygote's stdin, so it exits, and wait for it (its CPU then counts in this process's children)."""
        if self._keepalive is not None:
            os.close(self._keepalive)
            self._keepalive = None
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for path in (self.socket, self.folder):
            try:
                path.unlink() if path.is_socket() else path.rmdir()
            except OSError:
                pass


class ForkedKernel:
    """The handle jupyter_client keeps for a kernel process (the part of Popen it uses), for a forked kernel that
    is not this process's child: its exit and CPU arrive on the zygote connection."""

    def __init__(self, conn: socket.socket, reply: dict) -> None:
        self.conn = conn
        self.pid = reply["pid"]
        self.pgid = reply["pgid"]
        self.returncode: int | None = None
        self.stdin = self.stdout = self.stderr = None

    def poll(self) -> int | None:
        return self.wait(timeout=0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once the keeper reports it (None while the kernel runs and `timeout` has passed)."""
        if self.returncode is None:
            ready, _, _ = select.select([self.conn], [], [], timeout)  # blocks until ready when timeout is None
            if not ready:
                return None
            message = self.conn.recv(1 << 16)
            ended = json.loads(message) if message else {"exit": -9}  # the keeper was killed with its group
            self.returncode = ended["exit"]
            counts.cpu += ended.get("cpu", 0.0)
            self.conn.close()
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(9)

    def terminate(self) -> None:
        self.send_signal(15)


class ForkedProvisioner(LocalProvisioner):
    """LocalProvisioner whose kernel comes from the zygote; signals, polling and shutdown work as for Popen."""

    async def launch_kernel(self, cmd: list[str], **kwargs) -> dict:
        env = kwargs.get("env") or dict(os.environ)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        out = [_fileno(kwargs.get("stdout"), 1), _fileno(kwargs.get("stderr"), 2)]
        try:
            zygote = Zygote.get()
            conn = zygote.connect()
        except (OSError, RuntimeError) as e:  # no zygote: the kernel jupyter_client would have started
            counts.unforked += 1
            print(f"fmlab: starting a kernel without the zygote ({e})", file=sys.stderr)
            return await super().launch_kernel(cmd, **kwargs)
        socket.send_fds(conn, [json.dumps({"argv": cmd, "env": env, "cwd": cwd}).encode()], out)
        reply = json.loads(conn.recv(1 << 16))
        counts.cpu += max(0.0, reply["zygote_cpu"] - zygote.reported_cpu)
        zygote.reported_cpu = max(zygote.reported_cpu, reply["zygote_cpu"])
        if reply["forked"]:
            counts.forked += 1
        else:
            counts.execed += 1
            counts.exec_reasons.update(reply["differs"])
        self.process = ForkedKernel(conn, reply)
        self.pid, self.pgid, self.cwd = self.process.pid, self.process.pgid, cwd
        return self.connection_info


def _fileno(stream, default: int) -> int:
    if stream is None:
        return default
    return stream if isinstance(stream, int) else stream.fileno()


class WarmKernelManager(AsyncKernelManager):
    """AsyncKernelManager whose kernels are forked from the zygote (unless FMLAB_WARM_KERNELS=0)."""

    async def _async_pre_start_kernel(self, **kw):
        if self.provisioner is None and enabled():
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(uuid.uuid4())
            self.provisioner = ForkedProvisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
        return await super()._async_pre_start_kernel(**kw)
