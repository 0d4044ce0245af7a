"""The suite ships in the wheel (issue 28): a wheel built from this tree, installed in a fresh environment,
runs ``checks/`` with ``pytest --gpulayout`` in an empty folder: from the installed package, not from this
checkout (``pytest_gpulayout/checks`` in the wheel; ``plugin.SUITE_DIR``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

MANIFEST = """\
version: 1
machine: two-l4.yaml
deployments:
  qwen3-8b-tp2:
    model: Qwen/Qwen3-8B
    engine_version: "0.33.0"
    tensor_parallel_size: 2
    max_model_len: 8192
"""


def test_a_wheel_built_from_the_tree_runs_its_suite_in_an_empty_folder(tmp_path: Path) -> None:
    dist, venv, project = tmp_path / "dist", tmp_path / "venv", tmp_path / "project"
    # the wheel, built offline (hatchling comes with the dev install)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
                    str(ROOT)], check=True, capture_output=True, timeout=180)
    [wheel] = dist.glob("pytest_gpulayout-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # the wheel alone in the new environment (unpacked as pip would); its dependencies come from this
    # environment's site-packages, named in a path file (whose own .pth files, the editable install's among
    # them, Python does not run: this checkout stays off the path)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True, capture_output=True, timeout=180)
    deps = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    (site / "zz-dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(deps)))
    project.mkdir()
    (project / "gpulayout.yaml").write_text(MANIFEST)
    (project / "two-l4.yaml").write_text((DATA / "snapshots" / "two-l4.yaml").read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    r = subprocess.run([str(python), "-m", "pytest", "--gpulayout", "-v", "-p", "no:cacheprovider"], cwd=project,
                       capture_output=True, text=True, env=env, timeout=180)
    out = r.stdout + r.stderr
    ran = re.findall(r"^(\S+::\S+) (PASSED|SKIPPED|FAILED)", r.stdout, re.M)
    checks = ["config", "placement", "heads", "balance", "links", "kv_pool", "cluster", "startup"]
    assert [i for i, _ in ran] == [f"pytest_gpulayout/checks/test_{c}.py::test_{c}[qwen3-8b-tp2]" for c in checks], out
    assert r.returncode == 0, out
    # the suite it ran is the installed one
    where = subprocess.run([str(python), "-c", "from pytest_gpulayout import plugin; print(plugin.SUITE_DIR)"],
                           capture_output=True, text=True, env=env, check=True, cwd=project).stdout.strip()
    assert Path(where) == site / "pytest_gpulayout" / "checks", where
    assert sorted(p.name for p in Path(where).glob("test_*.py")) == sorted(p.name for p in (ROOT / "checks").glob(
        "test_*.py"))
