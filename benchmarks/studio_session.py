"""Memory of a learner's Studio session: JupyterLab itself, the path's notebooks opened in order, every kernel left open.

Run: .venv/bin/python benchmarks/studio_session.py --path one-day [--json docs/measurements/studio-session.json]

A learner opens each notebook of the path in JupyterLab, runs it top to bottom and moves on without shutting its
kernel down, then runs the path's labs the same way. This starts `jupyter lab` (no browser), and for each notebook
(the path's cut notebooks, `fmlab.course.pathrun.write_path`; then the path's lab solutions) opens a session through
the server's REST API, so the kernel is the server's child as in Studio, and runs its code cells through that
kernel's channels. A sampler reads every 0.5 s the proportional set size (PSS) of the server's whole process tree:
JupyterLab, every kernel, and what the kernels start (torchrun, its workers, servers, Slurm jobs are the Slurm
daemons' children and are not counted). Reported: the peak, the tree at rest with every kernel open, and each
kernel's size at rest. Never asserted (the machine is shared); the figures go in docs/instructor.md.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil
from course_memory import GIB, tree_pss  # this script's folder: the same PSS reading

from fmlab.course import pathrun, paths
from fmlab.environment import ROOT, free_port


def tree_and_children(pid: int) -> tuple[int, dict[int, int]]:
    """(bytes of PSS of `pid` and its descendants, {child pid: its own subtree's bytes} for its direct children)."""
    try:
        children = psutil.Process(pid).children()
    except psutil.Error:
        return 0, {}
    return tree_pss(pid), {child.pid: tree_pss(child.pid) for child in children}


def api(port: int, token: str, method: str, route: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{route}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read().decode()
    return json.loads(text) if text else {}


def run_cells(connection_file: Path, notebook: Path, timeout: float = 900) -> str:
    """Run `notebook`'s code cells in the kernel of `connection_file`; '' when all ran, else the first error."""
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=str(connection_file))
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            code = "".join(cell["source"])
            reply = client.execute_interactive(code, timeout=timeout, output_hook=lambda _: None)
            if reply["content"]["status"] != "ok":
                return f"{reply['content'].get('ename')}: {reply['content'].get('evalue')}"
        return ""
    finally:
        client.stop_channels()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default="one-day", choices=("one-day", "two-day"))
    parser.add_argument("--json", default="build/studio-session.json")
    args = parser.parse_args()
    path = pathrun.path_name(args.path)
    token, port = secrets.token_hex(16), free_port()
    runtime = Path(tempfile.mkdtemp(prefix="fmlab-jupyter-runtime-"))
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}", "--ServerApp.open_browser=False", "--allow-root"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(runtime / "server.log", "w"),
        env={**__import__("os").environ, "JUPYTER_RUNTIME_DIR": str(runtime), "OMP_NUM_THREADS": "2"})
    for _ in range(120):
        try:
            api(port, token, "GET", "/api/status")
            break
        except OSError:
            if server.poll() is not None:
                sys.exit(f"jupyter lab ended: {(runtime / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
    peak = {"bytes": 0, "at": ""}
    current = {"at": "JupyterLab alone"}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            total = tree_pss(server.pid)
            if total > peak["bytes"]:
                peak.update(bytes=total, at=current["at"])
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    time.sleep(3)
    alone = tree_pss(server.pid)
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=".studio-", dir=ROOT / "notebooks") as cut_dir:
        chosen = pathrun.write_path(path, cut_dir) + [ROOT / "labs" / "solutions" / f"{name}.ipynb"
                                                     for name in paths.LABS[path]]
        for nb in chosen:
            current["at"] = nb.name
            session = api(port, token, "POST", "/api/sessions",
                          {"path": str(nb.relative_to(ROOT)), "type": "notebook", "kernel": {"name": "python3"}})
            kernel_id = session["kernel"]["id"]
            connection = runtime / f"kernel-{kernel_id}.json"
            for _ in range(60):
                if connection.exists():
                    break
                time.sleep(0.5)
            begin = time.perf_counter()
            error = run_cells(connection, nb)
            time.sleep(2)  # what the cells started has ended; the kernel stays open, as a learner leaves it
            total, children = tree_and_children(server.pid)
            rows.append({"notebook": nb.name, "ok": not error, "error": error, "seconds": round(time.perf_counter() - begin, 1),
                         "tree_gib_after": round(total / GIB, 2)})
            print(f"{nb.name:45} {'ok' if not error else 'FAILED ' + error[:60]} {rows[-1]['seconds']:6.1f} s; "
                  f"JupyterLab and {len(rows)} kernels: {total / GIB:.2f} GiB", flush=True)
        at_rest, children = tree_and_children(server.pid)
        done.set()
        sampler.join()
        kernels = sorted(children.values())
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    result = {"path": path, "date": time.strftime("%Y-%m-%d"), "wall_seconds": round(time.perf_counter() - started),
              "machine": f"{psutil.cpu_count()} cores, {psutil.virtual_memory().total / GIB:.0f} GiB",
              "jupyterlab_alone_gib": round(alone / GIB, 2), "peak_gib": round(peak["bytes"] / GIB, 2),
              "peak_during": peak["at"], "at_rest_gib": round(at_rest / GIB, 2), "kernels_open": len(kernels),
              "kernel_at_rest_gib": {"smallest": round(kernels[0] / GIB, 2), "largest": round(kernels[-1] / GIB, 2)}
              if kernels else {}, "notebooks": rows}
    print(json.dumps({k: v for k, v in result.items() if k != "notebooks"}, indent=1))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
