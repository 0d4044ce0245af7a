"""Node ids a user can re-run (issue 24 item 11, kept through issue 28). The checks are the suite's modules,
``checks/`` (in the wheel ``pytest_gpulayout/checks``), one test per check parametrized by deployment:
``pytest_gpulayout/checks/test_links.py::test_links[qwen3-8b-tp2]`` where the suite lies outside the rootdir
(every project that installs the plugin, and these pytester projects). pytest, ``--lf``, ``-k``, ``--deselect``
and ``-m`` take them back: a printed id is re-run as printed (the plugin finds the installed module), the
manifest names a selection (``gpulayout.yaml::<deployment>[::<check>]``), and a user's own ``test_links.py``
shares neither an id nor a module name with them (the suite's modules are imported as
``pytest_gpulayout._suite.<name>``)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]
CHECKS = ["config", "placement", "heads", "balance", "links", "kv_pool", "cluster", "startup"]
SUITE = "pytest_gpulayout/checks"

MANIFEST = """\
version: 1
machine: two-l4.yaml
defaults:
  engine: vllm
  engine_version: "0.33.0"
  model: Qwen/Qwen3-8B
  max_model_len: 8192
deployments:
  qwen3-8b-tp2:
    tensor_parallel_size: 2
  qwen3.5-pp2:
    pipeline_parallel_size: 2
"""
#: a deployment that cannot be placed on two GPUs: its placement check fails
TOO_MANY = "  too-many:\n    tensor_parallel_size: 2\n    data_parallel_size: 2\n"


def _project(where: Path, manifest: str = MANIFEST, name: str = "gpulayout.yaml") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "two-l4.yaml").write_text((DATA / "snapshots" / "two-l4.yaml").read_text())
    (where / name).write_text(manifest)
    return where / name


def _ran(result: pytest.RunResult) -> list[str]:
    """The node ids of the tests that ran, in order (from ``-v`` output)."""
    return [m.group(1) for line in result.stdout.lines
            if (m := re.match(r"(\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR)", line))]


def _id(deployment: str, check: str) -> str:
    return f"{SUITE}/test_{check}.py::test_{check}[{deployment}]"


def _ids(*deployments: str, checks: list[str] = CHECKS) -> list[str]:
    return [_id(d, c) for d in deployments for c in checks]


NO_CACHE = ("-p", "no:cacheprovider")


def test_the_ids_are_manifest_deployment_check(pytester: pytest.Pytester):
    _project(pytester.path)
    result = pytester.runpytest("--gpulayout", "-v", *NO_CACHE)
    assert _ran(result) == _ids("qwen3-8b-tp2", "qwen3.5-pp2")  # the manifest's order, a deployment's checks together
    result.assert_outcomes(passed=12, skipped=4, warnings=1)
    # the warning is reported under the check's id; it points at the deployment's line in the manifest
    assert re.search(re.escape(_id("qwen3-8b-tp2", "links")) + r"\n.*gpulayout\.yaml:9: GpuLayoutWarning",
                     result.stdout.str()), result.stdout.str()


def test_a_deployment_or_one_check_by_its_id(pytester: pytest.Pytester):
    _project(pytester.path)
    one_deployment = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "gpulayout.yaml::qwen3.5-pp2")
    assert _ran(one_deployment) == _ids("qwen3.5-pp2")
    # a dotted deployment name stays one id part, in the verbose line too
    assert f"{_id('qwen3.5-pp2', 'kv_pool')} PASSED" in one_deployment.stdout.str()
    one_check = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "gpulayout.yaml::qwen3-8b-tp2::kv_pool")
    assert _ran(one_check) == [_id("qwen3-8b-tp2", "kv_pool")]
    one_check.assert_outcomes(passed=1)
    # ... and by the suite's own id, as pytest prints it
    by_id = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, _id("qwen3-8b-tp2", "kv_pool"))
    assert _ran(by_id) == [_id("qwen3-8b-tp2", "kv_pool")]
    missing = pytester.runpytest("--gpulayout", *NO_CACHE, "gpulayout.yaml::qwen3-8b-tp9")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    assert "not found: " in missing.stderr.str() + missing.stdout.str()


def test_a_failed_id_is_rerun_as_printed_and_by_lf(pytester: pytest.Pytester):
    _project(pytester.path, MANIFEST + TOO_MANY)
    first = pytester.runpytest("--gpulayout", "-rf")  # with the cache: --lf needs it
    failed = re.findall(r"^FAILED (\S+) - ", first.stdout.str(), re.M)
    assert failed == [_id("too-many", "placement")], first.stdout.str()
    # the printed id, given back to pytest, runs that check again
    again = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, *failed)
    assert _ran(again) == failed
    again.assert_outcomes(failed=1)
    # --lf reruns the failure only
    last_failed = pytester.runpytest("--gpulayout", "-v", "--lf")
    assert _ran(last_failed) == failed
    last_failed.assert_outcomes(failed=1)
    # --lf with a failure of the user's own beside it: both are run again
    pytester.makepyfile(test_mine="def test_mine():\n    assert False\n")
    pytester.runpytest("--gpulayout")
    both = pytester.runpytest("--gpulayout", "-v", "--lf")
    assert sorted(_ran(both)) == sorted([*failed, "test_mine.py::test_mine"]), both.stdout.str()
    assert "run-last-failure: rerun previous 1 failure" in last_failed.stdout.str()


def test_k_selects_a_check_across_deployments(pytester: pytest.Pytester):
    _project(pytester.path)
    result = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "-k", "kv_pool")
    assert _ran(result) == _ids("qwen3-8b-tp2", "qwen3.5-pp2", checks=["kv_pool"])
    result.assert_outcomes(passed=2, deselected=14)
    by_deployment = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "-k", "qwen3-8b-tp2 and not startup")
    assert _ran(by_deployment) == _ids("qwen3-8b-tp2", checks=CHECKS[:-1])


def test_deselect_a_deployment_or_a_check(pytester: pytest.Pytester, tmp_path: Path):
    _project(pytester.path)
    report = tmp_path / "r.json"
    result = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "--deselect", "gpulayout.yaml::qwen3-8b-tp2",
                                "--deselect", _id("qwen3.5-pp2", "startup"), f"--gpulayout-report={report}")
    assert _ran(result) == _ids("qwen3.5-pp2", checks=CHECKS[:-1])
    result.assert_outcomes(passed=6, skipped=1, deselected=9)
    # what did not run is listed (item 10): a deselected check keeps a deployment from passing
    assert json.loads(report.read_text())["not_run"] == {"qwen3-8b-tp2": CHECKS, "qwen3.5-pp2": ["startup"]}


def test_marker_leaves_the_checks_out(pytester: pytest.Pytester):
    _project(pytester.path)
    pytester.makepyfile(test_mine="def test_mine():\n    pass\n")
    result = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "-m", "not gpulayout")
    assert _ran(result) == ["test_mine.py::test_mine"]
    result.assert_outcomes(passed=1, deselected=16)


def test_a_users_test_links_py_next_to_the_manifest_does_not_collide(pytester: pytest.Pytester):
    _project(pytester.path)
    pytester.makepyfile(test_links="def test_links():\n    pass\n\ndef test_nvlink():\n    pass\n")
    both = pytester.runpytest("--gpulayout", "-v", *NO_CACHE)
    ran = _ran(both)
    assert [i for i in ran if i.startswith("test_links.py")] == ["test_links.py::test_links",
                                                                 "test_links.py::test_nvlink"]
    assert sorted(i for i in ran if not i.startswith("test_links.py")) == sorted(_ids("qwen3-8b-tp2", "qwen3.5-pp2"))
    # the user's file, by its path: only the user's tests are deselected (before: the suite's links too)
    without_mine = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "--deselect", "test_links.py")
    assert sorted(_ran(without_mine)) == sorted(_ids("qwen3-8b-tp2", "qwen3.5-pp2"))
    # the user's file named on the command line: its tests, and the manifest's checks as --gpulayout adds them
    mine = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "test_links.py", "-k", "not nvlink")
    assert _ran(mine) == ["test_links.py::test_links", *_ids("qwen3-8b-tp2", "qwen3.5-pp2")]
    # plain pytest: the manifest is not collected at all
    plain = pytester.runpytest("-v", *NO_CACHE)
    assert _ran(plain) == ["test_links.py::test_links", "test_links.py::test_nvlink"]


def test_a_manifest_outside_the_collected_paths_still_gives_its_checks(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch):
    deploy = pytester.path / "deploy"
    _project(deploy, name="prod.yml")  # not named gpulayout.yaml, not under testpaths
    pytester.makeini("[pytest]\ntestpaths = tests\ngpulayout_manifest = deploy/prod.yml\n")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_mine.py").write_text("def test_mine():\n    pass\n")
    result = pytester.runpytest("--gpulayout", "-v", *NO_CACHE)
    ran = _ran(result)
    assert ran[0] == "tests/test_mine.py::test_mine"
    assert ran[1:] == _ids("qwen3-8b-tp2", "qwen3.5-pp2")
    # ... and a selection of them by the manifest's path, also from another directory
    one = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "deploy/prod.yml::qwen3.5-pp2::heads")
    assert _ran(one) == [_id("qwen3.5-pp2", "heads")]
    monkeypatch.chdir(pytester.path / "tests")
    from_tests = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "../deploy/prod.yml::qwen3.5-pp2::heads")
    assert _ran(from_tests) == ["../" + _id("qwen3.5-pp2", "heads")]  # as pytest shows ids from below the rootdir
    again = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "../" + _id("qwen3.5-pp2", "heads"))
    assert _ran(again) == ["../" + _id("qwen3.5-pp2", "heads")]
    by_id = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, _id("qwen3.5-pp2", "heads"))
    assert _ran(by_id) == ["../" + _id("qwen3.5-pp2", "heads")]


def test_a_gpulayout_yaml_named_on_the_command_line_is_the_manifest(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\n")  # the rootdir holds no gpulayout.yaml
    _project(pytester.path / "examples" / "l4")
    result = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "examples/l4/gpulayout.yaml::qwen3-8b-tp2::heads")
    assert _ran(result) == [_id("qwen3-8b-tp2", "heads")]
    _project(pytester.path / "examples" / "other")
    two = pytester.runpytest("--gpulayout", *NO_CACHE, "examples/l4/gpulayout.yaml",
                             "examples/other/gpulayout.yaml")
    assert two.ret == pytest.ExitCode.USAGE_ERROR
    assert "one manifest per run" in two.stderr.str()


def test_xdist_workers_run_the_items_and_the_ids_come_back(pytester: pytest.Pytester, tmp_path: Path):
    pytest.importorskip("xdist")
    _project(pytester.path, MANIFEST + TOO_MANY)
    report = tmp_path / "r.json"
    result = pytester.runpytest_subprocess("--gpulayout", "-n", "2", "-rf", *NO_CACHE, f"--gpulayout-report={report}")
    assert re.findall(r"^FAILED (\S+) - ", result.stdout.str(), re.M) == [_id("too-many", "placement")]
    data = json.loads(report.read_text())
    assert list(data["deployments"]) == ["qwen3-8b-tp2", "qwen3.5-pp2", "too-many"]
    assert data["deployments"]["too-many"]["checks"]["placement"]["status"] == "fail"
    assert "not_run" not in data


def test_a_llamacpp_deployment_has_its_engines_checks(pytester: pytest.Pytester):
    """llama.cpp is judged by five static checks and ``startup``: it omits ``cluster`` (``Omit`` in its
    ``check_overrides``), so the suite has no ``test_cluster`` item for it (an earlier suite of one module per
    check ran ``test_cluster`` for it too and ended in ``KeyError: 'cluster'``)."""
    example = ROOT / "examples" / "06-llamacpp-mismatched"
    for name in ("gpulayout.yaml", "machine.yaml", "qwen2.5-32b-q4_k_m.header.gguf"):
        shutil.copy(example / name, pytester.path / name)
    result = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "gpulayout.yaml::layer-3-1")
    assert _ran(result) == _ids("layer-3-1", checks=["config", "placement", "heads", "balance", "links", "kv_pool",
                                                    "startup"])
    result.assert_outcomes(passed=6, skipped=1)


def test_a_users_own_test_with_the_check_fixtures_runs_once_per_deployment(pytester: pytest.Pytester):
    """Tests written against ``gpulayout_check`` / ``gpulayout_deployment`` keep working beside the items."""
    _project(pytester.path)
    pytester.makepyfile(test_pool="""
        def test_pool(gpulayout_check, gpulayout_deployment):
            finding = gpulayout_check("kv_pool")
            assert finding.check == "kv_pool" and gpulayout_deployment.name in finding.message
        """)
    result = pytester.runpytest("--gpulayout", "-v", *NO_CACHE, "test_pool.py", "-k", "test_pool")
    assert _ran(result) == ["test_pool.py::test_pool[qwen3-8b-tp2]", "test_pool.py::test_pool[qwen3.5-pp2]"]
    result.assert_outcomes(passed=2, deselected=16)
