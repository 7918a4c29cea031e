"""What both zygotes' keepers do (fmlab.course.kernel_zygote, fmlab.train.worker_zygote): watch the child they
forked until it ends, then report how it ended, or kill it once its caller is gone.

Each zygote loads this file by path, as `_fmlab_zygote`, never as fmlab.zygote: a zygote must not import fmlab,
whose modules read FMLAB_* variables that differ from one child to the next.
"""

import json
import os
import select
import signal
import socket
import threading
from collections.abc import Callable


def listen(path: str) -> socket.socket:
    """The zygote's listening socket at `path`, which appears only once the zygote can serve (its imports done).
    A fork copies only the calling thread, so no other Python thread may be running. (Imports may leave native
    threads: OpenBLAS's pools, which OpenBLAS stops before a fork (pthread_atfork) and starts again on first use,
    and jemalloc's background thread (pyarrow's), which jemalloc's own fork handlers take care of.)"""
    assert threading.active_count() == 1, f"a fork needs the main thread alone, found {threading.enumerate()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path + ".tmp")
    listener.listen(16)
    os.rename(path + ".tmp", path)
    return listener


def watch(conn: socket.socket, pid: int, on_exit: Callable[[float], None] | None = None) -> None:
    """In a keeper: when the child `pid` ends, send `{"exit": code, "cpu": seconds}` on `conn` and call
    `on_exit(seconds)`; if `conn` closes first (the caller was killed), SIGKILL the child's process group, the
    keeper's own too when the child shares it. Never returns."""
    group = os.getpgid(pid)
    pidfd = os.pidfd_open(pid)
    while True:
        ready, _, _ = select.select([conn, pidfd], [], [])
        if pidfd in ready:
            _, status, usage = os.wait4(pid, 0)
            cpu = usage.ru_utime + usage.ru_stime  # the child's, and that of the processes it waited for
            try:
                conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status), "cpu": cpu}).encode())
            except OSError:
                pass
            if on_exit is not None:
                on_exit(cpu)
            os._exit(0)
        try:
            gone = not conn.recv(1)
        except OSError:
            gone = True
        if gone:
            for kill, target in ((os.killpg, group), (os.kill, pid)):
                try:
                    kill(target, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os._exit(0)
