"""SGLang's ``--config FILE`` merged as each release's ``ConfigArgumentMerger`` merges it (``engines/sglang/
config_file.py``; the facts per release from ``tools/flags_sglang_config.py``), as a user sees it in the verdicts:
the file's keys reach the layout and the pool, the line's own flags win, every refusal is the merger's words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from pytest_gpulayout.cli import main
from pytest_gpulayout.engines.sglang import cli

M = ["--model-path", "Qwen/Qwen3-8B"]


def _yaml(tmp_path: Path, text: str, name: str = "serve.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _resolve(words: list[str], version: str) -> Any:
    return cli.resolve([*M, *words], Version(version))


def test_the_files_keys_are_read_and_the_lines_own_flags_win(tmp_path: Path) -> None:
    f = _yaml(tmp_path, "tp-size: 4\nmem-fraction-static: 0.7\ncontext-length: 8192\n")
    for version in ("0.5.3", "0.5.8", "0.5.14", "0.5.23"):
        r = _resolve(["--config", f, "--context-length", "4096"], version)
        assert r.ok, (version, r.errors)
        got = (r.get(r.dest("--tp-size")), r.get("mem_fraction_static"), r.get("context_length"))
        assert got == (4, 0.7, 4096), version


def test_before_0_5_3_there_is_no_config_flag(tmp_path: Path) -> None:
    r = _resolve(["--config", _yaml(tmp_path, "tp-size: 4\n")], "0.5.2")
    assert not r.ok and "unrecognized arguments: --config" in r.errors[0]


@pytest.mark.parametrize(("words", "version", "error"), [
    (["--config", "a.yaml", "--config", "b.yaml"], "0.5.23",
     "ValueError: Multiple config files specified! Only one allowed."),
    (["--config"], "0.5.8", "ValueError: No config file specified after --config flag!"),
    (["--config", "serve.json"], "0.5.3", "ValueError: Config file must be YAML format, got: .json"),
    (["--config", "absent.yaml"], "0.5.23", "ValueError: Config file not found: absent.yaml"),
])
def test_the_mergers_refusals_in_its_words(words: list[str], version: str, error: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _resolve(words, version).errors == (error,)


def test_a_file_that_is_not_a_mapping_is_refused_and_an_empty_one_merges_nothing(tmp_path: Path) -> None:
    assert _resolve(["--config", _yaml(tmp_path, "- 1\n- 2\n")], "0.5.23").errors == (
        "ValueError: Config file must contain a dictionary at root level",)
    r = _resolve(["--config", _yaml(tmp_path, "", "empty.yaml")], "0.5.23")
    assert r.ok and r.get("tp_size", r.get("tensor_parallel_size")) == 1


def test_unsupported_actions_are_refused_from_0_5_8_by_release(tmp_path: Path) -> None:
    # --enable-dp-attention is a DeprecatedStoreTrueAction in 0.5.23: refused in a file there
    f = _yaml(tmp_path, "enable-dp-attention: true\n")
    assert _resolve(["--config", f], "0.5.21").ok
    assert _resolve(["--config", f], "0.5.23").errors == (
        "ValueError: Unsupported config option 'enable_dp_attention' with action 'DeprecatedStoreTrueAction'",)
    lora = _yaml(tmp_path, "lora-paths: [a]\n", "lora.yaml")  # LoRAPathAction (nargs='*'): refused from 0.5.8
    assert _resolve(["--config", lora, "--enable-lora"], "0.5.6").ok
    assert _resolve(["--config", lora], "0.5.8").errors == (
        "ValueError: Unsupported config option 'lora_paths' with action 'LoRAPathAction'",)


def test_booleans_by_release(tmp_path: Path) -> None:
    # 0.5.3 - 0.5.7 find no boolean action: false is dropped; from 0.5.8 a store_true false is dropped too
    off, on = _yaml(tmp_path, "disable-radix-cache: false\n"), _yaml(tmp_path, "disable-radix-cache: true\n", "on.yaml")
    for version in ("0.5.3", "0.5.8", "0.5.23"):
        assert _resolve(["--config", off], version).get("disable_radix_cache") is False, version
        assert _resolve(["--config", on], version).get("disable_radix_cache") is True, version


def test_a_manifest_config_file_moves_placement_heads_and_pool(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:8xH100-sxm\ndeployments:\n  qwen:\n    model: Qwen/Qwen3-8B\n"
        "    engine: sglang\n    engine_version: '0.5.23'\n    launch:\n      args: [--config, serve.yaml]\n")
    (tmp_path / "serve.yaml").write_text("tp-size: 3\nmem-fraction-static: 0.7\ncontext-length: 8192\n")
    main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    checks = json.loads(capsys.readouterr().out)["deployments"]["qwen"]["checks"]
    assert checks["config"]["status"] == "pass"
    assert "TP=3" in checks["placement"]["message"]
    assert checks["heads"]["status"] == "fail" and "TP=3" in checks["heads"]["message"]  # 32 heads % 3
    (tmp_path / "serve.yaml").write_text("tp-size: 4\nmem-fraction-static: 0.7\ncontext-length: 8192\n")
    main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    checks = json.loads(capsys.readouterr().out)["deployments"]["qwen"]["checks"]
    assert "GPU3" in checks["placement"]["message"] and checks["heads"]["status"] == "pass"
    assert "memory_fraction 0.7" in checks["kv_pool"]["message"] and "8,192-token" in checks["kv_pool"]["message"]


@pytest.mark.parametrize(("engine", "release", "file", "line", "pool"), [
    # SGLang: --max-total-tokens caps the pool; the line's own flag wins over the file's
    ("sglang", "0.5.23", "max-total-tokens: 50000\n", [], "predicted KV pool 50,000 tokens"),
    ("sglang", "0.5.23", "max-total-tokens: 50000\n", ["--max-total-tokens", "60000"],
     "predicted KV pool 60,000 tokens"),
    # vLLM: --kv-cache-memory-bytes sizes the pool from the bytes (4 GiB / 147,456 B a token)
    ("vllm", "0.33.0", "kv-cache-memory-bytes: 4G\n", [], "predicted KV pool 29,120 tokens"),
])
def test_the_pool_flags_a_config_file_sets_reach_the_pool(engine: str, release: str, file: str, line: list[str],
                                                         pool: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A pool the engine sizes from the file's flags is predicted from them (judged on the defaults it was a
    pass the engine would not give: a pool of millions where the file caps it at 50,000)."""
    args = json.dumps(["--config", "serve.yaml", *line])
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:8xH100-sxm\ndeployments:\n  d:\n    model: Qwen/Qwen3-8B\n"
        f"    engine: {engine}\n    engine_version: '{release}'\n    launch:\n      args: {args}\n")
    (tmp_path / "serve.yaml").write_text(file)
    main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    kv = json.loads(capsys.readouterr().out)["deployments"]["d"]["checks"]["kv_pool"]
    assert pool in kv["message"], kv["message"]


def test_a_manifest_missing_config_file_fails_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:8xH100-sxm\ndeployments:\n  qwen:\n    model: Qwen/Qwen3-8B\n"
        "    engine: sglang\n    engine_version: '0.5.23'\n    launch:\n      args: [--config, serve.yaml]\n")
    assert main(["check", str(tmp_path / "gpulayout.yaml"), "--json"]) == 1
    config = json.loads(capsys.readouterr().out)["deployments"]["qwen"]["checks"]["config"]
    assert config["status"] == "fail" and "ValueError: Config file not found: serve.yaml" in config["message"]


def test_a_containers_config_file_is_not_read_here_and_says_what_was_not_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k8s = tmp_path / "sglang.yaml"
    k8s.write_text("""apiVersion: apps/v1
kind: Deployment
metadata: {name: qwen}
spec:
  template:
    spec:
      containers:
      - name: engine
        image: lmsysorg/sglang:v0.5.23-cu129
        command: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen3-8B, --config, /etc/sglang/config.yaml]
        resources: {limits: {nvidia.com/gpu: 4}}
      volumes: [{name: shm, emptyDir: {medium: Memory}}]
""")
    main(["check", str(k8s), "--machine", "preset:8xH100-sxm", "--json"])
    deps = json.loads(capsys.readouterr().out)["deployments"]
    [config] = [d["checks"]["config"] for d in deps.values()]
    assert config["status"] == "warn"
    assert "/etc/sglang/config.yaml is read inside" in config["message"]
    assert "were not judged" in config["message"]


@pytest.mark.parametrize(("tp", "heads"), [(3, "fail"), (4, "pass")])
def test_a_vllm_config_file_sets_the_layout_vllm_runs(tp: int, heads: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM merges its --config FILE too (engines/vllm/flexible.py): a file setting tensor-parallel-size 3 for
    Qwen3-8B's 32 heads is an engine that refuses to start, where judged at the manifest's TP=1 it passed."""
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:8xH100-sxm\ndeployments:\n  v:\n    model: Qwen/Qwen3-8B\n"
        "    engine_version: '0.33.0'\n    launch:\n      args: [--config, serve.yaml]\n")
    (tmp_path / "serve.yaml").write_text(f"tensor-parallel-size: {tp}\nmax-model-len: 8192\n")
    main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    checks = json.loads(capsys.readouterr().out)["deployments"]["v"]["checks"]
    assert f"TP={tp}" in checks["placement"]["message"] and checks["heads"]["status"] == heads
    if heads == "pass":
        assert "8,192-token requests" in checks["kv_pool"]["message"]


@pytest.mark.parametrize(("engine", "release", "spelling"), [
    ("sglang", "0.5.23", ["--config=serve.yaml"]),
    ("sglang", "0.5.8", ["--conf", "serve.yaml"]),      # argparse's abbreviation: parsed, never merged
    ("vllm", "0.33.0", ["--config=serve.yaml"]),
])
def test_a_config_file_given_as_config_equals_is_never_read_by_the_engine(
        engine: str, release: str, spelling: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both engines merge a file only where the word ``--config`` stands alone (vLLM's ``FlexibleArgumentParser.
    parse_args``, SGLang's ``prepare_server_args``: ``if "--config" in args``): ``--config=FILE`` is stored and
    ignored, so the engine runs the manifest's TP=1, not the file's TP=3. The layout is judged as the engine runs
    it, and the config check warns that the file is not read, with the spelling that is."""
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:8xH100-sxm\ndeployments:\n  d:\n    model: Qwen/Qwen3-8B\n"
        f"    engine: {engine}\n    engine_version: '{release}'\n    launch:\n      args: {json.dumps(spelling)}\n")
    (tmp_path / "serve.yaml").write_text("tensor-parallel-size: 3\n" if engine == "vllm" else "tp-size: 3\n")
    main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    checks = json.loads(capsys.readouterr().out)["deployments"]["d"]["checks"]
    config = checks["config"]
    assert config["status"] == "warn", config
    assert "does not read the file 'serve.yaml'" in config["message"]
    assert "write --config serve.yaml" in config["message"]
    assert checks["heads"]["status"] == "pass" and "TP=3" not in checks["placement"]["message"]
    spelled = ["--config", "serve.yaml"]
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:8xH100-sxm\ndeployments:\n  d:\n    model: Qwen/Qwen3-8B\n"
        f"    engine: {engine}\n    engine_version: '{release}'\n    launch:\n      args: {json.dumps(spelled)}\n")
    main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    checks = json.loads(capsys.readouterr().out)["deployments"]["d"]["checks"]
    assert "does not read" not in checks["config"]["message"] and checks["heads"]["status"] == "fail"


def test_a_flag_whose_type_function_is_not_rebuilt_warns_instead_of_passing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang 0.5.23 checks --cuda-graph-config's phases and keys in its own argparse type
    (``parse_cuda_graph_config_arg``, model_executor/cuda_graph_config.py:246-280), which is not rebuilt: the line is
    taken, and the config check says that value was not checked instead of passing it."""
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:8xH100-sxm\ndeployments:\n  d:\n    model: Qwen/Qwen3-8B\n"
        "    engine: sglang\n    engine_version: '0.5.23'\n    launch:\n"
        "      args: ['--cuda-graph-config', '{\"decode\": {\"max_bs\": 64}}']\n")
    main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    config = json.loads(capsys.readouterr().out)["deployments"]["d"]["checks"]["config"]
    assert config["status"] == "warn", config
    assert "--cuda-graph-config (parse_cuda_graph_config_arg) with a function of its own that is not modelled" in \
        config["message"]
