"""The pytest surface, through pytester: what a user running `pytest --gpulayout` sees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data"
#: the suite's id prefix in a project that installed the plugin (its modules lie outside the rootdir)
SUITE = "pytest_gpulayout/checks"

MANIFEST = """\
version: 1
machine: {machine}
defaults:
  engine: vllm
  engine_version: "0.33.0"
  model: Qwen/Qwen3-8B
  max_model_len: 8192
deployments:
{deployments}
"""

TP2 = """\
  qwen3-8b-tp2:
    tensor_parallel_size: 2
"""
PP2 = """\
  qwen3-8b-pp2:
    pipeline_parallel_size: 2
"""
@pytest.fixture
def project(pytester: pytest.Pytester):
    def make(*deployments: str, machine: str = "two-l4.yaml") -> pytest.Pytester:
        src = DATA / "snapshots" / machine
        if src.exists():
            (pytester.path / machine).write_text(src.read_text())
        pytester.makefile(".yaml", gpulayout=MANIFEST.format(machine=machine, deployments="".join(deployments)))
        return pytester

    return make


def test_inert_without_flag(pytester: pytest.Pytester):
    pytester.makepyfile(
        """
        import sys
        def test_nothing_loaded():
            heavy = [m for m in ("pynvml", "yaml", "pytest_gpulayout.session", "pytest_gpulayout.machine.probe",
                                 "pytest_gpulayout.runner") if m in sys.modules]
            assert heavy == []
        """
    )
    pytester.makefile(".yaml", gpulayout="version: 1\nthis is: [not, read\n")  # never opened without the flag
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "gpulayout:" not in result.stdout.str()  # no header line, no summary


def test_header_ids_and_summary(project):
    p = project(TP2, PP2)
    result = p.runpytest("--gpulayout", "-v", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "gpulayout: machine snapshot:" in out
    assert "2 x NVIDIA L4, driver 580.95.05" in out
    # the checks are the suite's modules, one item per check and deployment, a deployment's checks together
    assert f"{SUITE}/test_links.py::test_links[qwen3-8b-tp2] PASSED" in out
    assert f"{SUITE}/test_heads.py::test_heads[qwen3-8b-pp2] PASSED" in out
    # startup is opt-in: skipped with the reason
    assert f"{SUITE}/test_startup.py::test_startup[qwen3-8b-tp2] SKIPPED" in out
    ids = [line.split(" ")[0] for line in out.splitlines() if line.startswith(SUITE) and "%]" in line]
    checks = ["config", "placement", "heads", "balance", "links", "kv_pool", "cluster", "startup"]
    assert ids == [f"{SUITE}/test_{c}.py::test_{c}[{d}]" for d in ("qwen3-8b-tp2", "qwen3-8b-pp2") for c in checks]
    # terminal summary: one table, deployment x check
    summary = out[out.index("= gpulayout ="):]
    assert "qwen3-8b-tp2" in summary and "WARN PHB" in summary and "kv/rank 4" in summary
    assert result.ret == 0


def test_warn_is_a_warning_and_strict_fails(project):
    p = project(TP2)
    relaxed = p.runpytest("--gpulayout", "-p", "no:cacheprovider", "-k", "links")
    relaxed.assert_outcomes(passed=1, warnings=1)
    assert "GpuLayoutWarning" in relaxed.stdout.str()
    assert "gpulayout.yaml:9: GpuLayoutWarning: qwen3-8b-tp2" in relaxed.stdout.str()  # points at the fix
    strict = p.runpytest("--gpulayout", "--gpulayout-strict", "-p", "no:cacheprovider", "-k", "links")
    strict.assert_outcomes(failed=1)
    assert "[--gpulayout-strict] qwen3-8b-tp2: TP group GPU0-GPU1 is joined by PHB" in strict.stdout.str()
    werror = p.runpytest("--gpulayout", "-p", "no:cacheprovider", "-k", "links",
                         "-W", "error::pytest_gpulayout.GpuLayoutWarning")
    werror.assert_outcomes(failed=1)


def test_fail_carries_the_message_without_traceback(project):
    p = project(TP2.replace("tensor_parallel_size: 2", "tensor_parallel_size: 2\n    data_parallel_size: 2"))
    result = p.runpytest("--gpulayout", "-p", "no:cacheprovider", "-k", "placement")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "needs 4 GPUs; the machine shows 2" in out
    assert "Traceback" not in out and "plugin.py" not in out  # pytrace=False: the message, not the plugin's source
    assert "_ test_placement[qwen3-8b-tp2] _" in out  # the failure's heading names the check and the deployment
    assert f"FAILED {SUITE}/test_placement.py::test_placement[qwen3-8b-tp2]" in out  # an id pytest takes back


def test_junit_properties_and_report_file(project, tmp_path):
    p = project(TP2, PP2)
    xml, report = tmp_path / "j.xml", tmp_path / "r.json"
    p.runpytest("--gpulayout", "-p", "no:cacheprovider", f"--junitxml={xml}", f"--gpulayout-report={report}")
    text = xml.read_text()
    assert 'name="gpulayout.links.worst_link" value="PHB"' in text
    # the check's module and its item, by deployment
    assert '<testcase classname="pytest_gpulayout.checks.test_links" name="test_links[qwen3-8b-tp2]"' in text
    assert 'name="gpulayout.heads.kv_heads_per_rank" value="4"' in text
    assert 'name="gpulayout.kv_pool.predicted_kv_tokens_per_replica" value="[' in text
    data = json.loads(report.read_text())
    assert data["machine"]["gpus"] == 2
    tp2 = data["deployments"]["qwen3-8b-tp2"]
    assert tp2["status"] == "warn"
    assert tp2["checks"]["links"]["data"]["worst_link"] == "PHB"
    assert tp2["checks"]["heads"]["data"]["kv_heads_per_rank"] == 4
    assert data["deployments"]["qwen3-8b-pp2"]["checks"]["links"]["status"] == "pass"


def test_bad_manifest_is_one_line_naming_file_and_key(project):
    p = project(TP2.replace("tensor_parallel_size", "tensor_paralel_size"))
    result = p.runpytest_subprocess("--gpulayout", "-p", "no:cacheprovider")
    assert result.ret != 0
    err = result.stderr.str()
    assert "gpulayout.yaml" in err and "tensor_paralel_size" in err and "did you mean" in err
    assert "Traceback" not in err + result.stdout.str()


def test_no_nvml_exits_3_and_never_passes(project):
    p = project(TP2, machine="auto")
    result = p.runpytest_subprocess("--gpulayout", "-p", "no:cacheprovider")
    assert result.ret == 3
    assert "passed" not in result.stdout.str()
    assert "NVML" in result.stdout.str() + result.stderr.str()


def test_fixtures_in_a_users_own_test(pytester: pytest.Pytester):
    (pytester.path / "m.yaml").write_text((DATA / "snapshots" / "two-l4.yaml").read_text())
    pytester.makepyfile(
        """
        def test_machine(gpulayout_machine, gpulayout_gpus, gpulayout_links, gpulayout_model):
            assert [g.name for g in gpulayout_gpus] == ["NVIDIA L4", "NVIDIA L4"]
            assert gpulayout_links[(0, 1)] == "PHB"
            model = gpulayout_model("Qwen/Qwen3-8B")
            assert model.num_key_value_heads == 8
        """
    )
    result = pytester.runpytest("--gpulayout-machine", "m.yaml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_xdist_runs_the_suite_and_prints_the_summary(project):
    pytest.importorskip("xdist")
    p = project(TP2, PP2)
    result = p.runpytest_subprocess("--gpulayout", "-n", "2", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == 0
    assert "= gpulayout =" in out and "qwen3-8b-pp2" in out


def test_html_report_from_pytest(project, tmp_path):
    p = project(TP2, PP2)
    html = tmp_path / "report.html"
    p.runpytest("--gpulayout", "-p", "no:cacheprovider", f"--gpulayout-html={html}")
    text = html.read_text()
    assert "qwen3-8b-tp2" in text and "qwen3-8b-pp2" in text and "PHB" in text
    assert "http://" not in text and "https://" not in text


def test_unwritable_report_path_is_a_usage_error_before_any_test(project, tmp_path):
    p = project(TP2)
    result = p.runpytest_subprocess("--gpulayout", "-p", "no:cacheprovider",
                                    f"--gpulayout-report={tmp_path / 'missing' / 'r.json'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gpulayout-report" in result.stderr.str() and "Traceback" not in result.stderr.str()
    assert "passed" not in result.stdout.str()


def test_manifest_found_in_the_invocation_dir_when_an_option_value_moves_the_rootdir(project, tmp_path):
    # `--gpulayout-machine PATH` (space form) makes pytest take PATH into its rootdir guess
    p = project(TP2)
    elsewhere = tmp_path / "machines"
    elsewhere.mkdir()
    (elsewhere / "m.yaml").write_text((DATA / "snapshots" / "two-l4.yaml").read_text())
    result = p.runpytest_subprocess("--gpulayout", "-p", "no:cacheprovider", "--gpulayout-machine",
                                    str(elsewhere / "m.yaml"), "-k", "links")
    result.assert_outcomes(passed=1, warnings=1)


def test_unwritable_log_dir_is_one_line(project, monkeypatch):
    p = project(TP2.replace("tensor_parallel_size: 2", "tensor_parallel_size: 2\n    launch:\n      enabled: true"))
    monkeypatch.setenv("GPULAYOUT_LOG_DIR", "/proc/no-such-dir/logs")
    result = p.runpytest("--gpulayout", "-p", "no:cacheprovider", "-k", "startup")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "GPULAYOUT_LOG_DIR: cannot create the engine log folder" in out and "Traceback" not in out


def test_a_log_dir_that_is_a_symlink_is_refused(project, monkeypatch, tmp_path):
    p = project(TP2.replace("tensor_parallel_size: 2", "tensor_parallel_size: 2\n    launch:\n      enabled: true"))
    (tmp_path / "target").mkdir()
    (tmp_path / "logs").symlink_to(tmp_path / "target")
    monkeypatch.setenv("GPULAYOUT_LOG_DIR", str(tmp_path / "logs"))
    result = p.runpytest("--gpulayout", "-p", "no:cacheprovider", "-k", "startup")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "GPULAYOUT_LOG_DIR: is a symbolic link" in out and "Traceback" not in out
    assert list((tmp_path / "target").iterdir()) == []


# ------------------------------------------------------------------------------------------------
# Issue 24 item 10: a partial run (-k, -x, deselection) reported pass, also for a deployment that cannot fit
# ------------------------------------------------------------------------------------------------
BIG = """\
  too-big:
    model: Qwen/Qwen3-32B
    tensor_parallel_size: 2
"""


def test_a_partial_run_is_incomplete_never_pass(project, tmp_path):
    p = project(PP2, BIG)
    report, html = tmp_path / "r.json", tmp_path / "r.html"
    result = p.runpytest("--gpulayout", "-p", "no:cacheprovider", "-k", "heads",
                         f"--gpulayout-report={report}", f"--gpulayout-html={html}")
    result.assert_outcomes(passed=2)                      # pytest's own outcome is unchanged
    data = json.loads(report.read_text())
    assert data["status"] == "incomplete"
    others = ["config", "placement", "balance", "links", "kv_pool", "cluster", "startup"]
    assert data["not_run"] == {"qwen3-8b-pp2": others, "too-big": others}
    big = data["deployments"]["too-big"]
    assert big["status"] == "incomplete" and big["not_run"] == others
    assert big["checks"]["heads"]["status"] == "pass"
    text = html.read_text()
    assert 'data-overall="incomplete"' in text and 'data-verdict="pass"' not in text
    assert 'data-status="not run"' in text and "14 checks did not run" in text
    out = result.stdout.str()
    summary = out[out.index("= gpulayout ="):]
    assert "incomplete" in summary and " pass \n" not in summary
    assert "gpulayout: incomplete: 14 checks did not run" in out


def test_a_run_stopped_by_x_keeps_its_fail_and_lists_what_did_not_run(project, tmp_path):
    p = project(BIG)
    report = tmp_path / "r.json"
    result = p.runpytest("--gpulayout", "-p", "no:cacheprovider", "-x", "-k", "kv_pool or balance or startup",
                         f"--gpulayout-report={report}")
    assert result.ret == 1
    data = json.loads(report.read_text())
    assert data["status"] == "fail"                       # a failure stays a failure
    assert "startup" in data["not_run"]["too-big"]


def test_a_whole_run_has_no_not_run(project, tmp_path):
    p = project(PP2)
    report = tmp_path / "r.json"
    p.runpytest("--gpulayout", "-p", "no:cacheprovider", f"--gpulayout-report={report}")
    data = json.loads(report.read_text())
    assert "not_run" not in data and data["status"] != "incomplete"
    assert "not_run" not in data["deployments"]["qwen3-8b-pp2"]


def test_manifest_option_accepts_a_deployment_artifact(pytester: pytest.Pytester):
    """``--gpulayout-manifest`` takes a Kubernetes artifact as ``gpulayout check`` does (issue 22)."""
    (pytester.path / "two-l4.yaml").write_text((DATA / "snapshots" / "two-l4.yaml").read_text())
    (pytester.path / "k8s.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: qwen}\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: vllm\n        image: vllm/vllm-openai:v0.33.0\n"
        "        args: [--model, Qwen/Qwen3-8B, -tp, '2', --max-model-len, '8192']\n"
        "        resources: {limits: {nvidia.com/gpu: 2}}\n")
    result = pytester.runpytest("--gpulayout", "--gpulayout-manifest", "k8s.yaml", "--gpulayout-machine",
                                "two-l4.yaml", "-v", "-p", "no:cacheprovider", "-k", "heads")
    out = result.stdout.str()
    assert f"{SUITE}/test_heads.py::test_heads[Deployment/qwen/vllm] PASSED" in out
    assert result.ret == 0
    # the whole suite: deploy is one of its checks, so TP=2 without a /dev/shm volume fails here as it does in
    # `gpulayout check k8s.yaml` (issue 28: pytest said "5 passed, 2 skipped", the CLI "fail deploy"; config passes)
    whole = pytester.runpytest("--gpulayout", "--gpulayout-manifest", "k8s.yaml", "--gpulayout-machine",
                               "two-l4.yaml", "-p", "no:cacheprovider", "-rf")
    whole.assert_outcomes(passed=6, skipped=2, failed=1, warnings=1)
    assert f"FAILED {SUITE}/test_deploy.py::test_deploy[Deployment/qwen/vllm]" in whole.stdout.str()
    assert "Deployment/qwen/vllm: spec.template.spec.volumes has no /dev/shm" in whole.stdout.str()
