"""`gpulayout check` on the bundled reference scenarios: the verdicts and numbers design.md states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gpulayout.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def check_json(capsys, manifest: str, *extra: str) -> tuple[int, dict]:
    code = main(["check", str(EXAMPLES / manifest), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_two_l4_tp2_warns_pp2_and_dp2_pass(capsys):
    code, out = check_json(capsys, "01-two-l4-pcie/gpulayout.yaml")
    assert code == 0  # warnings allowed
    deps = out["deployments"]
    tp2, pp2, dp2 = deps["qwen3-8b-tp2"], deps["qwen3-8b-pp2"], deps["qwen3-8b-dp2"]
    assert tp2["status"] == "warn"
    assert tp2["checks"]["links"]["status"] == "warn"
    assert "pipeline_parallel_size: 2" in tp2["checks"]["links"]["message"]
    assert tp2["checks"]["kv_pool"]["data"]["kv_bytes_per_token_per_rank"] == 73_728
    assert pp2["checks"]["links"]["status"] == "pass"
    assert pp2["status"] == "pass"
    # DP=2 holds a full copy per card: two pools, each with the full model's weights
    pool = dp2["checks"]["kv_pool"]["data"]
    assert len(pool["predicted_kv_tokens_per_replica"]) == 2
    assert pool["weights_gib_per_rank"] > 2 * tp2["checks"]["kv_pool"]["data"]["weights_gib_per_rank"] * 0.95
    assert dp2["status"] == "pass"


def test_two_l4_busy_sglang_tp2_fails_balance_by_1_25_gib(capsys):
    code, out = check_json(capsys, "01-two-l4-pcie/busy.gpulayout.yaml")
    assert code == 1
    bal = out["deployments"]["qwen3-8b-sglang-tp2"]["checks"]["balance"]
    assert bal["status"] == "fail"
    assert bal["data"]["headroom_gib"] == pytest.approx(-1.25, abs=0.005)
    assert bal["data"]["min_free_gib"] == 18.28 and bal["data"]["max_free_gib"] == 21.7


def test_gemma3_tp2_shards_kv_dp2_keeps_full_pool_per_card(capsys):
    _, out = check_json(capsys, "02-two-32gb-gemma3/gpulayout.yaml")
    tp2 = out["deployments"]["gemma3-12b-tp2"]["checks"]
    dp2 = out["deployments"]["gemma3-12b-dp2"]["checks"]
    assert tp2["heads"]["data"]["kv_heads_per_rank"] == 4      # half of Gemma 3 12B's 8 KV heads
    assert dp2["heads"]["data"]["kv_heads_per_rank"] == 8
    assert tp2["kv_pool"]["data"]["kv_bytes_per_token_per_rank"] * 2 == \
        dp2["kv_pool"]["data"]["kv_bytes_per_token_per_rank"]
    assert len(dp2["kv_pool"]["data"]["predicted_kv_tokens_per_replica"]) == 2
    assert len(tp2["kv_pool"]["data"]["predicted_kv_tokens_per_replica"]) == 1


def test_four_a100_tp4_70b_weights_and_kv_room(capsys):
    _, out = check_json(capsys, "03-four-a100-nvlink/gpulayout.yaml")
    d = out["deployments"]["llama-70b-tp4"]["checks"]
    assert d["links"]["status"] == "pass"
    w = d["kv_pool"]["data"]["weights_gib_per_rank"]
    assert 31.5 < w < 34.5           # ~35 GB (32.9 GiB) of a 141 GB model per GPU
    budget = d["kv_pool"]["data"]["kv_budget_gib_per_rank"]
    assert 35 < budget < 45          # ~45 GB (41.9 GiB) left for KV cache and buffers, minus activations


def test_tp3_for_32_heads_fails_heads_and_exits_1(capsys):
    code, out = check_json(capsys, "04-heads-not-divisible/gpulayout.yaml")
    assert code == 1
    heads = out["deployments"]["llama-8b-tp3"]["checks"]["heads"]
    assert heads["status"] == "fail"
    assert "must be divisible by tensor parallel size (3)" in heads["message"]


def test_deepseek_v3_mla_kv_bytes_do_not_shrink_with_tp(capsys):
    _, out = check_json(capsys, "05-deepseek-v3-mla/gpulayout.yaml")
    d = out["deployments"]["deepseek-v3-tp8"]["checks"]
    assert d["kv_pool"]["data"]["kv_bytes_per_token_per_rank"] == 70_272
    assert d["heads"]["data"]["kv_heads_per_rank"] == 1


def test_text_output_and_table(capsys):
    code = main(["check", str(EXAMPLES / "01-two-l4-pcie/gpulayout.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    assert "machine: snapshot:" in out
    assert "qwen3-8b-tp2  [WARN]" in out
    assert "deployment" in out and "kv_pool" in out  # the summary table


def test_strict_turns_warnings_into_exit_1(capsys):
    assert main(["check", str(EXAMPLES / "01-two-l4-pcie/gpulayout.yaml"), "--strict"]) == 1


def test_machine_override_and_missing_manifest(capsys, tmp_path):
    code = main(["check", str(EXAMPLES / "01-two-l4-pcie/gpulayout.yaml"), "--machine", "preset:8xH100-sxm",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["deployments"]["qwen3-8b-tp2"]["checks"]["links"]["data"]["worst_link"] == "NV18"
    code = main(["check", str(tmp_path / "nope.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "nope.yaml" in err and err.count("\n") == 1


def _config_failure(capsys, argv):
    """A model that cannot be read fails its deployment's config check (issue 30), in one line naming the file and
    the key, under --json one object; the run's other checks go on."""
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    assert code == 1, captured
    data = json.loads(captured.out)
    [dep] = data["deployments"].values()
    config = dep["checks"]["config"]
    assert config["status"] == "fail" and dep["status"] == "fail" and data["status"] == "fail"
    assert dep["checks"]["placement"]["status"] != "skip"  # what does not need the model was still checked
    assert "\n" not in config["message"]
    return config["message"]


def test_bad_model_reference_names_manifest_and_key(capsys, tmp_path):
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:2xL4-pcie\ndeployments:\n  x:\n    model: ./no-such-model\n")
    message = _config_failure(capsys, ["check", str(tmp_path / "gpulayout.yaml")])
    assert "gpulayout.yaml" in message and "deployments.x.model" in message


def test_machine_auto_without_nvml_exits_3_never_passes(capsys, tmp_path):
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: auto\ndeployments:\n  x:\n    model: Qwen/Qwen3-8B\n")
    code = main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    captured = capsys.readouterr()
    assert code == 3
    assert captured.out == ""           # no verdict printed for a machine nobody saw
    assert "NVML" in captured.err and captured.err.count("\n") == 1


def test_machine_notes_are_shown_next_to_the_verdicts(capsys, tmp_path):
    snap = (EXAMPLES / "01-two-l4-pcie/machine.yaml").read_text()
    (tmp_path / "m.yaml").write_text(snap + "notes: [\"CUDA_DEVICE_ORDER is not PCI_BUS_ID on a mixed host\"]\n")
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: m.yaml\ndeployments:\n  x:\n    model: Qwen/Qwen3-8B\n    max_model_len: 4096\n")
    main(["check", str(tmp_path / "gpulayout.yaml")])
    assert "note: CUDA_DEVICE_ORDER is not PCI_BUS_ID on a mixed host" in capsys.readouterr().out
    main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    assert json.loads(capsys.readouterr().out)["machine"]["notes"] == [
        "CUDA_DEVICE_ORDER is not PCI_BUS_ID on a mixed host"]


def test_unwritable_html_and_log_dir_are_one_line_errors(capsys, tmp_path):
    manifest = str(EXAMPLES / "01-two-l4-pcie/gpulayout.yaml")
    for extra in (["--html", str(tmp_path / "no" / "x.html")], ["--html", str(tmp_path)]):
        code = main(["check", manifest, *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    # --log-dir is only used (and created) with --launch
    assert main(["check", manifest, "--log-dir", str(tmp_path / "logs")]) == 0
    assert not (tmp_path / "logs").exists()


def test_a_directory_means_its_gpulayout_yaml(capsys):
    assert main(["check", str(EXAMPLES / "01-two-l4-pcie"), "--json"]) == 0
    assert "qwen3-8b-tp2" in json.loads(capsys.readouterr().out)["deployments"]


def test_max_model_len_beyond_the_model_fails_with_the_engines_override(capsys, tmp_path):
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:8xH100-sxm\ndefaults:\n  model: Qwen/Qwen3-8B\n  max_model_len: 65536\n"
        "deployments:\n  v:\n    engine: vllm\n  s:\n    engine: sglang\n"
        "  v-override:\n    engine: vllm\n    launch:\n      env: {VLLM_ALLOW_LONG_MAX_MODEL_LEN: \"1\"}\n")
    code, out = check_json(capsys, str(tmp_path / "gpulayout.yaml"))
    assert code == 1
    v, s, o = (out["deployments"][n]["checks"]["kv_pool"] for n in ("v", "s", "v-override"))
    assert v["status"] == "fail" and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in v["message"] and "40,960" in v["message"]
    assert s["status"] == "fail" and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in s["message"]
    assert o["status"] == "warn"


def test_memory_unknown_is_never_a_pass(capsys, tmp_path):
    topo = (Path(__file__).parents[1] / "data" / "topo" / "003.txt").read_text().split("---\n", 1)[1]
    (tmp_path / "topo.txt").write_text(topo)
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: topo.txt\ndeployments:\n  pp2:\n    model: Qwen/Qwen3-8B\n"
        "    pipeline_parallel_size: 2\n    gpus: [1, 2]\n")
    code, out = check_json(capsys, str(tmp_path / "gpulayout.yaml"))
    d = out["deployments"]["pp2"]
    assert d["status"] == "warn"
    assert d["checks"]["balance"]["status"] == "warn" and d["checks"]["kv_pool"]["status"] == "warn"
    assert "NOT checked" in d["checks"]["kv_pool"]["message"]
    assert main(["check", str(tmp_path / "gpulayout.yaml"), "--strict"]) == 1


def test_bad_html_path_is_refused_before_any_launch(capsys):
    # with --launch the engines would start (and fail: no `vllm` here) before a late --html error
    code = main(["check", str(EXAMPLES / "01-two-l4-pcie/gpulayout.yaml"), "--launch", "--html", "/nonexistent/x.html"])
    captured = capsys.readouterr()
    assert code == 2 and "--html" in captured.err and captured.out == ""


def test_a_config_time_refusal_is_not_launched(tmp_path):
    from pytest_gpulayout.machine.sources import load_machine
    from pytest_gpulayout.manifest.load import load_manifest
    from pytest_gpulayout.runner import load_models, run_checks

    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:8xH100-sxm\ndeployments:\n  long:\n    model: Qwen/Qwen3-8B\n"
        "    max_model_len: 65536\n    launch:\n      enabled: true\n      command: [/bin/false]\n")
    manifest = load_manifest(tmp_path / "gpulayout.yaml")
    report = run_checks(manifest.deployments, load_machine("preset:8xH100-sxm"), load_models(manifest.deployments),
                        launch=True, log_dir=tmp_path)
    startup = report.results["long"].findings["startup"]
    # the release's own refusal (max_model_len above the derived 40,960) gates the launch before the pool does
    assert startup.status.value == "skip" and "not launched (config fails" in startup.message
    assert "User-specified max_model_len (65536) is greater than the derived max_model_len" in startup.message


@pytest.mark.parametrize("command", ["check", "plan"])
def test_an_absurd_layer_count_answers_at_once_with_one_clear_error(capsys, tmp_path, command):
    # issue 19 item 9: num_hidden_layers 10**9 used to walk every layer (a hang); no engine builds it
    # (llama.cpp b11434 src/llama-model.cpp asserts n_layer_all <= LLAMA_MAX_LAYERS = 512)
    import time

    cfg = json.loads((Path(__file__).parents[2] / "pytest_gpulayout/model/catalog/Qwen--Qwen3-8B.json").read_text())
    cfg["num_hidden_layers"] = 10**9
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: preset:2xL4-pcie\ndeployments:\n  x:\n    model: ./m\n")
    t = time.monotonic()
    if command == "check":  # the deployment's config fails; under --json, one object
        err = _config_failure(capsys, ["check", str(tmp_path / "gpulayout.yaml")])
    else:
        code = main(["plan", str(tmp_path / "m"), "--machine", "preset:2xL4-pcie"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1
    assert time.monotonic() - t < 20
    assert "num_hidden_layers 1,000,000,000 is past what any engine builds" in err


def test_a_gguf_past_llama_cpp_max_layers_is_refused_in_its_words(tmp_path):
    gguf = pytest.importorskip("gguf")

    from pytest_gpulayout.errors import InputError
    from pytest_gpulayout.model.gguf import load_gguf

    path = tmp_path / "big.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_block_count(10**6)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(InputError, match="LLAMA_MAX_LAYERS = 512"):
        load_gguf(path)
