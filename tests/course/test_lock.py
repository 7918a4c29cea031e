"""The lock (requirements/lock.txt, written by `make lock`): complete, CPU-only, within pyproject.toml's ranges, and
what this environment actually has installed, so two set-ups from it are the same.

    python -m pytest tests/course/test_lock.py
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements/lock.txt"


def _locked() -> dict[str, list[Requirement]]:
    """Package -> its lines; a universal lock may hold one package twice, for Pythons or platforms that differ."""
    out: dict[str, list[Requirement]] = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            req = Requirement(line)
            out.setdefault(canonicalize_name(req.name), []).append(req)
    for name, reqs in out.items():
        if len(reqs) > 1:
            assert all(r.marker is not None for r in reqs), f"{name} is locked twice without markers to choose"
            assert sum(r.marker.evaluate() for r in reqs) <= 1, f"two lines of {name} apply on this platform"
    return out


def _pinned_version(req: Requirement) -> str:
    (spec,) = req.specifier
    assert spec.operator == "==", f"{req} is not pinned to one version"
    return spec.version


def test_every_direct_dependency_is_locked_within_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    direct = list(project["dependencies"])
    for extra in ("course", "dev"):
        direct += project["optional-dependencies"][extra]
    locked = _locked()
    for line in direct:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name in locked, f"{req.name} (pyproject.toml) is not in the lock: run make lock"
        for line_of_lock in locked[name]:
            version = _pinned_version(line_of_lock)
            assert req.specifier.contains(version, prereleases=True), f"the lock's {line_of_lock} is outside {req}"


def test_the_lock_holds_the_cpu_build_and_the_courses_torch():
    locked = _locked()
    assert [_pinned_version(r) for r in locked["torch"]] == ["2.13.0"]
    gpu_only = {canonicalize_name(line.strip()) for line in (ROOT / "requirements/gpu-only.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    assert "nvidia-nccl-cu13" in gpu_only
    cuda = sorted(n for n in locked if n in gpu_only or n.startswith(("nvidia-", "cuda-")) or n == "triton")
    assert cuda == [], f"CUDA-only packages in the lock (they belong to a GPU set-up): {cuda}"


def test_this_environment_is_the_lock():
    """What `pip freeze` would say here equals the lock, for every package whose markers apply on this platform."""
    differs = []
    for name, reqs in _locked().items():
        applying = [r for r in reqs if r.marker is None or r.marker.evaluate()]
        if not applying:
            continue
        (req,) = applying
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            differs.append(f"{name}: not installed")
            continue
        want = _pinned_version(req)
        if have.split("+")[0] != want:  # torch's local label (+cpu, +cu130) names the build, not the version
            differs.append(f"{name}: {have} installed, {want} locked")
    assert differs == [], "this environment is not the lock's (run make setup):\n" + "\n".join(differs)


def test_conda_environment_installs_the_same_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-r requirements/lock.txt" in pip
    assert any(line.startswith("--extra-index-url https://download.pytorch.org/whl/cpu") for line in pip)
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert tuple(int(x) for x in python.split("=")[1].split(".")) >= (3, 11)
