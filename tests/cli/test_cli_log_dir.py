"""Where `gpulayout check` puts engine logs (issue 24 items 8 and 12), with the fake engine replaying
vLLM CPU's startup log through the real launcher.

Without ``--log-dir`` a run used to leave a ``/tmp/gpulayout-logs-*`` folder each time; a ``--log-dir``
that is a symbolic link was followed, and one that anyone may write in and another user owns was used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
REPO = HERE.parent
FAKE = HERE / "fakes" / "fake_engine.py"
TINY_LOG = HERE / "data" / "logs" / "vllm-cpu" / "vllm-tiny.log"
TINY_DIR = HERE / "data" / "models" / "tiny-llama"
FAILED_LOG = HERE / "data" / "logs" / "vllm-cpu" / "vllm-tp3.log"   # the engine refuses TP=3 and exits


def _deployment(name: str, root: Path, *, exit_code: int | None = None, enabled: bool = False) -> str:
    mode = "exits-early" if exit_code is not None else "replay"
    log = FAILED_LOG if exit_code is not None else TINY_LOG
    extra = f", --fake-exit-code, \"{exit_code}\"" if exit_code is not None else ""
    return f"""\
  {name}:
    model: ./tiny-llama
    max_model_len: 512
    launch:
      enabled: {str(enabled).lower()}
      command: [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))}, --fake-mode, {mode},
                --fake-log, {json.dumps(str(log))}, --fake-pid-dir, {json.dumps(str(root / "pids"))}{extra}]
      env: {{FAKE_ENGINE_SCALE: "0.01"}}
      timeout_s: 60
"""


def _manifest(root: Path, *deployments: str) -> Path:
    (root / "pids").mkdir(exist_ok=True)
    if not (root / "tiny-llama").exists():
        shutil.copytree(TINY_DIR, root / "tiny-llama")
    (root / "machine.yaml").write_text((HERE / "data" / "snapshots" / "two-l4.yaml").read_text())
    path = root / "gpulayout.yaml"
    path.write_text("version: 1\nmachine: machine.yaml\ndeployments:\n" + "".join(deployments))
    return path


def _check(root: Path, *argv: str) -> tuple[int, dict, str]:
    tmp = root / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPULAYOUT_LOCK_DIR": str(root / "locks"), "TMPDIR": str(tmp)}
    proc = subprocess.run([sys.executable, "-m", "pytest_gpulayout.cli", "check", *argv, "--json"],
                          capture_output=True, text=True, env=env, cwd=root, timeout=120)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


def _run_folders(root: Path) -> list[Path]:
    return sorted((root / "tmp").glob("gpulayout-logs-*"))


def test_without_log_dir_a_run_of_passing_launches_leaves_no_folder(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, _deployment("ok", tmp_path))
    for _ in range(2):
        code, report, err = _check(tmp_path, str(manifest), "--launch")
        startup = report["deployments"]["ok"]["checks"]["startup"]
        assert (code, startup["status"]) == (0, "pass"), err
        assert startup["data"]["log_path"] is None and "Log:" not in startup["message"]  # it points at nothing gone
    assert _run_folders(tmp_path) == []
    assert "logs of the launches" not in err


def test_without_log_dir_only_the_logs_of_failed_launches_are_kept_and_named(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, _deployment("ok", tmp_path), _deployment("broken", tmp_path, exit_code=3))
    code, report, err = _check(tmp_path, str(manifest), "--launch")
    assert code == 1, err
    (folder,) = _run_folders(tmp_path)
    broken = report["deployments"]["broken"]["checks"]["startup"]
    assert broken["status"] == "fail"
    assert [p.name for p in folder.iterdir()] == [Path(broken["data"]["log_path"]).name]
    assert f"gpulayout: logs of the launches that did not pass are in {folder}" in err


def test_a_log_dir_that_is_a_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, _deployment("ok", tmp_path))
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "logs").symlink_to(target)
    code, report, err = _check(tmp_path, str(manifest), "--launch", "--log-dir", str(tmp_path / "logs"))
    assert (code, report) == (2, {})
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"gpulayout: {tmp_path / 'logs'}: --log-dir: is a symbolic link")
    assert list(target.iterdir()) == []


def _foreign_world_writable(tmp_path: Path) -> Path:
    if os.geteuid() == 0:
        folder = tmp_path / "shared"
        folder.mkdir()
        os.chown(folder, 65534, 65534)
        os.chmod(folder, 0o777)
        return folder
    tmp = Path("/tmp")
    if tmp.stat().st_uid == os.geteuid() or not tmp.stat().st_mode & 0o002:
        pytest.skip("no folder anyone may write in that another user owns")
    return tmp


def test_a_world_writable_log_dir_another_user_owns_is_refused(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, _deployment("ok", tmp_path))
    folder = _foreign_world_writable(tmp_path)
    before = set(folder.iterdir())
    code, report, err = _check(tmp_path, str(manifest), "--launch", "--log-dir", str(folder))
    assert (code, report) == (2, {})
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--log-dir: anyone may write in this folder and another user" in err
    assert set(folder.iterdir()) == before


# ------------------------------------------------------------------------------------------------
# Item 12: the log folder applies to every launch, also those launch.enabled starts without --launch
# ------------------------------------------------------------------------------------------------
def test_log_dir_applies_to_a_launch_that_launch_enabled_starts(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, _deployment("ok", tmp_path, enabled=True))
    code, report, err = _check(tmp_path, str(manifest), "--log-dir", str(tmp_path / "logs"))  # no --launch
    startup = report["deployments"]["ok"]["checks"]["startup"]
    assert (code, startup["status"]) == (0, "pass"), err
    assert Path(startup["data"]["log_path"]).parent == tmp_path / "logs"
    assert [p.name for p in (tmp_path / "logs").iterdir()] == [Path(startup["data"]["log_path"]).name]
    assert _run_folders(tmp_path) == []


def test_gpulayout_log_dir_applies_to_a_launch_that_launch_enabled_starts(tmp_path: Path) -> None:
    _manifest(tmp_path, _deployment("ok", tmp_path, enabled=True))
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPULAYOUT_LOCK_DIR": str(tmp_path / "locks")}
    env.pop("GPULAYOUT_LOG_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--gpulayout", "-p", "no:cacheprovider", "-k", "startup",
                           "--gpulayout-log-dir", "logs", "--gpulayout-report", "report.json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    startup = json.loads((tmp_path / "report.json").read_text())["deployments"]["ok"]["checks"]["startup"]
    assert startup["status"] == "pass"
    assert Path(startup["data"]["log_path"]).parent == tmp_path / "logs"
    assert len(list((tmp_path / "logs").iterdir())) == 1
