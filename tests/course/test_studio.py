"""The SageMaker Studio lifecycle script (studio/on-start.sh), run here as Studio runs it: in a fresh home folder,
as its own user, with the course cloned from a git URL, the set-up in the background.

The set-up's pip steps are requirements/install.sh, which `make setup` runs on every fresh clone; here the script
is pointed at this checkout's environment, already installed from the same lock, so install.sh has nothing to do
and the test checks everything around it: clone, background start, status, kernels, the opened index, a second
start that keeps the learner's edits, and a failure that says where to look.

    python -m pytest tests/course/test_studio.py
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)


def _installed_stamp() -> str:
    """The stamp install.sh leaves; the test needs this checkout's venv to be the lock's, or it would reinstall it."""
    stamp = VENV / ".installed"
    digest = hashlib.sha256((ROOT / "requirements/lock.txt").read_bytes() + (ROOT / "pyproject.toml").read_bytes())
    text = stamp.read_text().strip() if stamp.exists() else ""
    if not text.startswith(digest.hexdigest()[:16] + " torch-index="):
        pytest.fail(f"{VENV} was not installed from this lock by requirements/install.sh: run `make setup` first")
    return text.split(" torch-index=", 1)[1]


def _course_repo(tmp: Path) -> Path:
    """A git repository holding what the script needs, from this working tree, as an instructor's course URL."""
    src = tmp / "course.git"
    for rel in ("studio", "requirements", "pyproject.toml", "notebooks/index.ipynb"):
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (ROOT / rel).is_dir() else shutil.copy2)(ROOT / rel, target)
    git = ["git", "-c", "user.name=instructor", "-c", "user.email=i@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(src)], check=True)
    subprocess.run([*git, "-C", str(src), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(src), "commit", "-qm", "course"], check=True)
    return src


def _start_space(home: Path, repo: Path, torch_index: str, **extra: str) -> subprocess.CompletedProcess:
    """Run the lifecycle script as Studio does: the space's user, its home as the working folder, a plain environment."""
    env = {"HOME": str(home), "USER": "sagemaker-user", "PATH": os.environ["PATH"], "LANG": "C.UTF-8",
           "FMLAB_REPO": str(repo), "FMLAB_VENV": str(VENV), "TORCH_INDEX": torch_index, **extra}
    started = time.monotonic()
    done = subprocess.run(["bash", str(ROOT / "studio/on-start.sh")], cwd=home, env=env, capture_output=True,
                          text=True, timeout=120)
    assert time.monotonic() - started < 60, "the lifecycle script itself must return quickly (Studio stops it at 5 min)"
    return done


def _wait_for(home: Path, timeout: float = 180) -> str:
    status = home / ".fmlab-setup/status"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = status.read_text().strip() if status.exists() else ""
        if text.startswith(("ready", "failed")):
            return text
        time.sleep(0.5)
    pytest.fail(f"the background set-up did not finish in {timeout} s; its log:\n"
                f"{(home / '.fmlab-setup/setup.log').read_text()}")


def test_studio_lifecycle_script_sets_up_a_fresh_space(tmp_path):
    torch_index = _installed_stamp()
    repo = _course_repo(tmp_path)
    home = tmp_path / "home" / "sagemaker-user"
    home.mkdir(parents=True)

    first = _start_space(home, repo, torch_index)
    assert first.returncode == 0, first.stderr
    assert "set-up running in the background" in first.stdout
    status = _wait_for(home)
    log = (home / ".fmlab-setup/setup.log").read_text()
    assert status.startswith("ready: kernel fmlab"), f"{status}\n{log}"
    assert "already installed from this lock" in log

    assert (home / "fmlab/notebooks/index.ipynb").exists()
    kernels = home / ".local/share/jupyter/kernels"
    for name in ("fmlab", "python3"):
        spec = json.loads((kernels / name / "kernel.json").read_text())
        assert Path(spec["argv"][0]).parent == VENV / "bin", spec
        assert spec["display_name"].startswith("fmlab (Python 3.")
        assert spec["env"]["FMLAB_BACKEND"] == "local"  # on-start.sh's default: nothing billed until chosen
    run = subprocess.run([spec["argv"][0], "-c", "import fmlab, torch; print(torch.__version__)"],
                         capture_output=True, text=True, check=True)
    assert run.stdout.startswith("2.13.0")

    for path, first_notebook in (("one-day", "03_parallel_jobs_and_warm_pools"), ("two-day", "01_when_to_pretrain")):
        written = sorted((home / "fmlab/workshop" / path).glob("*.ipynb"))
        assert written and written[0].stem == first_notebook, (path, written)
    workspace_files = list((home / ".jupyter/lab/workspaces").glob("default-*.jupyterlab-workspace"))
    assert len(workspace_files) == 1
    workspace = json.loads(workspace_files[0].read_text())
    assert workspace["data"]["layout-restorer:data"]["main"]["current"] == "notebook:fmlab/notebooks/index.ipynb"

    # A second start (Studio keeps the home folder): the learner's work and layout stay as they are.
    edited = home / "fmlab/notebooks/index.ipynb"
    edited.write_text(edited.read_text() + "\n")
    mine = edited.read_text()
    worked = home / "fmlab/workshop/one-day/03_parallel_jobs_and_warm_pools.ipynb"
    worked.write_text(worked.read_text().replace("learning_rates = ", "learning_rates = [1e-3] or "))
    work = worked.read_text()
    workspace_files[0].write_text(json.dumps({"data": {}, "metadata": {"id": "/default"}}))
    (home / ".fmlab-setup/status").unlink()
    second = _start_space(home, repo, torch_index)
    assert second.returncode == 0, second.stderr
    assert _wait_for(home).startswith("ready")
    assert edited.read_text() == mine and worked.read_text() == work  # a learner's workshop notebook is kept
    assert json.loads(workspace_files[0].read_text())["data"] == {}


def test_studio_set_up_failure_is_reported_in_the_status_file(tmp_path):
    repo = _course_repo(tmp_path)
    home = tmp_path / "home" / "sagemaker-user"
    home.mkdir(parents=True)
    done = _start_space(home, repo, "", FMLAB_VENV=str(tmp_path / "new-venv"), PYTHON=str(tmp_path / "no-python"))
    assert done.returncode == 0, done.stderr
    status = _wait_for(home, timeout=60)
    assert status.startswith("failed:") and "setup.log" in status, status
    log = (home / ".fmlab-setup/setup.log").read_text()
    assert "no-python" in log


def test_the_lifecycle_config_request_in_the_readme_is_one_sagemaker_accepts():
    """CreateStudioLifecycleConfig with on-start.sh as content: the API model's shape and its 16 KiB limit."""
    import base64

    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("sagemaker")
    content = base64.b64encode((ROOT / "studio/on-start.sh").read_bytes()).decode()
    request = {"StudioLifecycleConfigName": "fmlab-course", "StudioLifecycleConfigAppType": "JupyterLab",
               "StudioLifecycleConfigContent": content}
    shape = model.operation_model("CreateStudioLifecycleConfig").input_shape
    assert not ParamValidator().validate(request, shape).has_errors()
    assert len(content) <= shape.members["StudioLifecycleConfigContent"].metadata["max"]
    assert "--studio-lifecycle-config-app-type JupyterLab" in (ROOT / "studio/README.md").read_text()
