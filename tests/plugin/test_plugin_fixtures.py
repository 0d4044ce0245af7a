"""The fixtures in a user's own test file under plain ``pytest`` (no ``--gpulayout``), the way a
newcomer writes a per-model regression test: the fixtures find ``gpulayout.yaml`` (rootdir, or the
ini key ``gpulayout_manifest``) on their own and honour its ``machine:``. Before, they ignored the
manifest without ``--gpulayout`` and failed with "NVML could not be loaded" on a box without a driver
(and would have probed the live GPUs on one with a driver, not the machine the manifest names)."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data"


MANIFEST = """\
version: 1
machine: {machine}
defaults:
  engine: vllm
  engine_version: "0.33.0"
deployments:
  qwen3-8b-tp2:
    model: Qwen/Qwen3-8B
    tensor_parallel_size: 2
    max_model_len: 8192
"""

USER_TEST = """
from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.manifest.load import Manifest
from pytest_gpulayout.model.spec import ModelSpec


def test_qwen_fits_the_l4_box(gpulayout_machine, gpulayout_gpus, gpulayout_links, gpulayout_manifest,
                              gpulayout_model):
    assert isinstance(gpulayout_machine, Machine)
    assert gpulayout_machine.source == {source!r}
    assert [g.name for g in gpulayout_gpus] == ["NVIDIA L4", "NVIDIA L4"]
    assert all(isinstance(g, Gpu) for g in gpulayout_gpus)
    assert gpulayout_links[(0, 1)] == "PHB"
    assert isinstance(gpulayout_manifest, Manifest)
    dep = gpulayout_manifest.deployment("qwen3-8b-tp2")
    assert isinstance(dep, Deployment) and dep.tensor_parallel_size == 2
    model = gpulayout_model("Qwen/Qwen3-8B")
    assert isinstance(model, ModelSpec)
    assert model.num_attention_heads % dep.tensor_parallel_size == 0
"""


def test_rootdir_manifest_machine_is_honoured_without_the_flag(pytester: pytest.Pytester):
    pytester.makefile(".yaml", gpulayout=MANIFEST.format(machine="preset:2xL4-pcie"))
    pytester.makepyfile(test_regression=USER_TEST.format(source="preset:2xL4-pcie"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    assert "NVML" not in out
    result.assert_outcomes(passed=1)


def test_ini_named_manifest_with_a_snapshot_next_to_it(pytester: pytest.Pytester):
    deploy = pytester.path / "deploy"
    deploy.mkdir()
    (deploy / "l4.yaml").write_text((DATA / "snapshots" / "two-l4.yaml").read_text())
    (deploy / "prod.yaml").write_text(MANIFEST.format(machine="l4.yaml"))  # relative to the manifest
    pytester.makeini("[pytest]\ngpulayout_manifest = deploy/prod.yaml\n")
    sub = pytester.path / "tests"
    sub.mkdir()
    (sub / "test_regression.py").write_text(USER_TEST.format(source=f"snapshot:{deploy / 'l4.yaml'}"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests")
    result.assert_outcomes(passed=1)


def test_no_manifest_anywhere_is_one_line_for_the_manifest_fixture(pytester: pytest.Pytester):
    pytester.makepyfile(
        """
        def test_needs_manifest(gpulayout_manifest):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpulayout-machine", "preset:2xL4-pcie")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "gpulayout: " in out and "no gpulayout.yaml in" in out
    assert "Traceback" not in out and "During handling" not in out


def test_a_broken_manifest_fails_the_fixture_naming_file_and_key(pytester: pytest.Pytester):
    pytester.makefile(".yaml", gpulayout=MANIFEST.format(machine="preset:2xL4-pcie").replace(
        "tensor_parallel_size", "tensor_paralel_size"))
    pytester.makepyfile(
        """
        def test_machine(gpulayout_machine):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "gpulayout.yaml" in out and "tensor_paralel_size" in out
    assert "Traceback" not in out and "During handling" not in out
