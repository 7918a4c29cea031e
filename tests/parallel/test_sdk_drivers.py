"""The SageMaker SDK v3 drivers the course was checked against: the installed sagemaker-train must build, through
its own driver code (mpi_driver.main(), torchrun_driver.create_commands(), run offline), exactly the commands that
notebook 04 and fmlab.service.smddp expect; and what SDK v2's SMDDP runner added is named, not assumed.

Run: .venv/bin/python -m pytest tests/parallel/test_sdk_drivers.py -q
"""

import tomllib
from pathlib import Path

from fmlab.service import libraries, smddp

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_pins_the_sdk_the_course_was_checked_against():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"{smddp.SDK_DISTRIBUTION}=={smddp.SDK_CHECKED}" in [d.replace(" ", "") for d in deps]
    assert smddp.installed_sdk() == smddp.SDK_CHECKED


def test_the_installed_drivers_build_the_commands_the_course_expects():
    got = smddp.driver_commands()
    assert got["Torchrun"] == smddp.EXPECTED_TORCHRUN_COMMAND
    assert got["MPI"] == smddp.EXPECTED_MPI_COMMAND
    assert smddp.driver_drift() == []
    assert smddp.mpirun_ranks(got["MPI"])["per_host"] == {"algo-1": 8, "algo-2": 8}


def test_a_changed_driver_is_reported(monkeypatch):
    changed = [*smddp.EXPECTED_MPI_COMMAND]
    changed[changed.index("-np") + 1] = "8"
    monkeypatch.setattr(smddp, "EXPECTED_MPI_COMMAND", changed)
    monkeypatch.setattr(smddp, "installed_sdk", lambda: "1.28.0")
    drift = smddp.driver_drift()
    assert len(drift) == 2
    assert "1.28.0 is installed" in drift[0] and "1.27.0" in drift[0]
    assert drift[1].startswith("the MPI driver now builds") and "-np 16" in drift[1] and "-np 8" in drift[1]


def test_sdk_v3_mpi_lacks_what_the_v2_smddp_runner_set():
    gaps = {g["SDK v2 runner set"]: g["in this command"] for g in smddp.v2_runner_gaps(smddp.EXPECTED_MPI_COMMAND)}
    assert gaps["FI_PROVIDER=efa"] is True  # the v3 driver sets it on EFA instances
    missing = [k for k, present in gaps.items() if not present]
    assert missing[:4] == ["smddprun", "SMDATAPARALLEL_USE_HOMOGENEOUS=1", "SMDATAPARALLEL_SERVER_ADDR=",
                           "SMDATAPARALLEL_SERVER_PORT=7592"]
    v2_like = ["mpirun", "-x", "SMDATAPARALLEL_SERVER_ADDR=algo-1", "-x", "SMDATAPARALLEL_USE_HOMOGENEOUS=1", "smddprun"]
    present = {g["SDK v2 runner set"] for g in smddp.v2_runner_gaps(v2_like) if g["in this command"]}
    assert present == {"smddprun", "SMDATAPARALLEL_USE_HOMOGENEOUS=1", "SMDATAPARALLEL_SERVER_ADDR="}


def test_smddp_and_smp_are_frozen_dated_and_sourced_in_one_place():
    assert (libraries.SMP.status, libraries.SMDDP.status, libraries.CURRENT.status) == ("frozen", "frozen", "current")
    assert libraries.LAST_SMP == "2.8.0" and libraries.LAST_SMP_DATE == "2025-04-01"
    assert smddp.SMDDP_INSTANCES == libraries.SMDDP_INSTANCE_TYPES == ("ml.p4d.24xlarge", "ml.p4de.24xlarge")
    assert "not p5" in libraries.SMDDP.instances and "untested by AWS" in libraries.SMDDP.launcher
    for ref in libraries.sources():
        assert ref.url.startswith("https://") and ref.read == libraries.READ_ON and ref.says
    rows = libraries.table()
    assert [r["status"] for r in rows] == ["current", "frozen", "frozen"]
    assert all(r["sources"] for r in rows)
    line = libraries.headline()
    assert "v2.8.0 (2025-04-01" in line and "not p5" in line and "up to 2.5" in line
    assert "validate_smddprun" in libraries.LAUNCH_DECISION and "untested by AWS" in libraries.LAUNCH_DECISION
