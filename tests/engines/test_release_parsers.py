"""Each release's own command-line parser, from the tables extracted from its wheel (issue 29, items 1 and 2):
what the release accepts, refuses (in its words), and the typed values it resolves.

Every expectation here was read in the release's own source and, for vLLM 0.32, checked against the real
parser (``test_real_vllm_parser.py``): the tables' releases and removals, argparse's wording, the rewriting
of vLLM's ``FlexibleArgumentParser`` release by release, SGLang's plain argparse, llama.cpp's matching.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.llamacpp import cli as llamacpp
from pytest_gpulayout.engines.sglang import cli as sglang
from pytest_gpulayout.engines.vllm import cli as vllm
from pytest_gpulayout.inputs.flag_tables import pack, unpack

REPO = Path(__file__).resolve().parents[2]
M = "Qwen/Qwen3-8B"


def v(text: str) -> Version:
    return Version(text)


# -- the tables ------------------------------------------------------------------------------------------------
def test_every_release_a_team_runs_has_its_table() -> None:
    vllm_releases = [Version(r) for r in vllm.TABLES.versions]
    sglang_releases = [Version(r) for r in sglang.TABLES.versions]
    assert min(vllm_releases) == v("0.8.0") and max(vllm_releases) == v("0.33.0")
    assert {v("0.10.1"), v("0.10.1.1"), v("0.10.2"), v("0.8.5.post1")} <= set(vllm_releases)
    assert min(sglang_releases) == v("0.4.6") and max(sglang_releases) == v("0.5.23")
    assert len(vllm_releases) >= 50 and len(sglang_releases) >= 60


def test_patch_releases_differ_where_their_wheels_do() -> None:
    """0.10.2 added --kv-cache-memory-bytes, which 0.10.1 did not take."""
    assert vllm.TABLES.table("0.10.1").option("--kv-cache-memory-bytes") is None
    option = vllm.TABLES.table("0.10.2").option("--kv-cache-memory-bytes")
    assert option is not None and option.type == "optional(human_readable_int)"


def test_each_option_cites_its_wheel_member_and_line() -> None:
    t = vllm.TABLES.table("0.33.0")
    assert t.wheel.startswith("vllm-0.33.0-") and "vllm/engine/arg_utils.py" in t.read
    tp = t.option("-tp")
    assert tp is not None and tp.at.startswith("vllm/engine/arg_utils.py:") and tp.at.split(":")[1].isdigit()
    s = sglang.TABLES.table("0.5.23").option("--tp-size")
    assert s is not None and s.at.startswith("sglang/srt/arg_groups/fields/")


def test_the_data_stays_compact() -> None:
    sizes = [(REPO / "pytest_gpulayout" / "engines" / e / "flags" / "releases.json").stat().st_size
             for e in ("vllm", "sglang", "llamacpp")]
    assert sum(sizes) < 2_000_000


def test_packing_keeps_every_release_as_it_was() -> None:
    records = [{"version": "1.0", "wheel": "a.whl", "options": [
                    {"flags": ["--a"], "dest": "a", "type": "int", "at": "x.py:1"},
                    {"flags": ["--b"], "dest": "b", "at": "x.py:2"}]},
               {"version": "1.1", "wheel": "b.whl", "options": [
                    {"flags": ["--c"], "dest": "c", "at": "y.py:3"},
                    {"flags": ["--a"], "dest": "a", "type": "float", "at": "x.py:9"}]}]
    packed = json.loads(json.dumps(pack("e", records, "test")))
    assert [{k: r[k] for k in ("version", "wheel", "options")} for r in unpack(packed)] == records
    assert "--b" not in json.dumps(packed["releases"][1])  # the second release is a difference


def test_tables_are_read_on_first_use_only() -> None:
    code = ("import pytest_gpulayout.engines.registry; from pytest_gpulayout.engines.vllm import cli; "
            "from pytest_gpulayout.engines.sglang import cli as s; "
            "print(cli.TABLES._data is None, s.TABLES._data is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split() == ["True", "True"]


# -- removed flags, with the release that removed them -----------------------------------------------------------
@pytest.mark.parametrize(("flag", "removed", "last"), [
    ("--swap-space", "0.18.0", "0.17.1"),
    ("--num-scheduler-steps", "0.10.1", "0.10.0"),
    ("--preemption-mode", "0.11.0", "0.10.2"),
    ("--max-seq-len-to-capture", "0.11.0", "0.10.2"),
    ("--cuda-graph-sizes", "0.13.0", "0.12.0"),
    ("--calculate-kv-scales", "0.28.0", "0.27.1"),
])
def test_a_removed_vllm_flag_is_refused_with_the_release_that_removed_it(flag: str, removed: str, last: str) -> None:
    option = vllm.TABLES.table(last).option(flag)
    assert option is not None
    words = [M, flag] if option.switch else [M, flag, str(option.choices[0]) if option.choices else "1"]
    assert vllm.resolve(words, v(last)).ok
    r = vllm.resolve(words, v("0.33.0"))
    assert r.errors[0].startswith(f"vllm: error: unrecognized arguments: {flag}")
    assert f"{flag} was removed in vLLM {removed} (last accepted by {last})" in r.hints


def test_disable_log_requests_swap_space_accepted_by_0_10_2_refused_by_0_33_0() -> None:
    old = vllm.resolve([M, "--disable-log-requests", "--swap-space", "4"], v("0.10.2"))
    assert old.ok and (old.get("disable_log_requests"), old.get("swap_space")) == (True, 4.0)
    new = vllm.resolve([M, "--disable-log-requests", "--swap-space", "4"], v("0.33.0"))
    assert new.errors == ("vllm: error: unrecognized arguments: --swap-space 4",)


def test_0_33_takes_disable_log_requests_again_as_the_inverse_of_enable_log_requests() -> None:
    """``EnableDisableAction`` (0.33.0 ``utils/argparse_utils.py``); 0.17 - 0.32 refuse the word."""
    assert vllm.resolve([M, "--disable-log-requests"], v("0.33.0")).get("enable_log_requests") is False
    assert not vllm.resolve([M, "--disable-log-requests"], v("0.32.0")).ok


# -- argparse's words ----------------------------------------------------------------------------------------------
def test_misspelt_ambiguous_and_switch_with_a_value_in_the_releases_words() -> None:
    typo = vllm.resolve([M, "--tensor-paralel-size", "2"], v("0.33.0"))
    assert typo.errors == ("vllm: error: unrecognized arguments: --tensor-paralel-size 2",)
    assert typo.hints == ("--tensor-paralel-size: did you mean --tensor-parallel-size?",)
    ambiguous = vllm.resolve([M, "--max-num", "8"], v("0.33.0"))
    assert ambiguous.errors[0].startswith("vllm serve: error: ambiguous option: --max-num could match "
                                          "--max-num-batched-tokens, --max-num-scheduled-tokens, --max-num-seqs")
    eager = vllm.resolve([M, "--enforce-eager=true"], v("0.33.0"))
    assert eager.errors == ("vllm serve: error: argument --enforce-eager/--no-enforce-eager: ignored explicit "
                            "argument 'true'",)
    assert vllm.resolve([M, "--dtype", "fp16"], v("0.33.0")).errors[0] == (
        "vllm serve: error: argument --dtype: invalid choice: 'fp16' (choose from 'auto', 'bfloat16', 'float', "
        "'float16', 'float32', 'half')")
    assert vllm.resolve([M, "--tensor-parallel-size"], v("0.33.0")).errors == (
        "vllm serve: error: argument --tensor-parallel-size/-tp: expected one argument",)


def test_vllm_rewrites_underscores_sglang_does_not() -> None:
    r = vllm.resolve([M, "--tensor_parallel_size", "2", "-dcp", "2"], v("0.33.0"))
    assert (r.get("tensor_parallel_size"), r.get("decode_context_parallel_size")) == (2, 2)
    s = sglang.resolve(["--model-path", M, "--max_running_requests", "8"], v("0.5.23"))
    assert s.errors == ("sglang serve: error: unrecognized arguments: --max_running_requests 8",)
    assert s.hints == ("--max_running_requests: did you mean --max-running-requests?",)
    assert sglang.resolve(["--model-path", M, "--max-running", "8"], v("0.5.23")).get("max_running_requests") == 8


# -- typed values ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("words", "dest", "value"), [
    (["--kv-cache-memory-bytes", "20G"], "kv_cache_memory_bytes", 20 * 2**30),
    (["--kv-cache-memory-bytes", "20g"], "kv_cache_memory_bytes", 20 * 10**9),
    (["--max-num-batched-tokens", "32k"], "max_num_batched_tokens", 32_000),
    (["--max-model-len", "128k"], "max_model_len", 128_000),
    (["--max-model-len", "128K"], "max_model_len", 131_072),
    (["--max-model-len", "auto"], "max_model_len", -1),
    (["--max-model-len", "-1"], "max_model_len", -1),
    (["--compilation-config.mode", "3"], "compilation_config", {"mode": 3}),
    (["-cc.cudagraph_capture_sizes", "[1, 2, 4]"], "compilation_config", {"cudagraph_capture_sizes": [1, 2, 4]}),
    (["--limit-mm-per-prompt.image", "0"], "limit_mm_per_prompt", {"image": 0}),
    (["--hf-overrides.rope_scaling.factor", "2.0"], "hf_overrides", {"rope_scaling": {"factor": 2.0}}),
    (["-O3"], "optimization_level", "3"),
    (["--no-enable-prefix-caching"], "enable_prefix_caching", False),
])
def test_vllm_0_33_resolves_human_readable_ints_and_dotted_json(words: list[str], dest: str, value: object) -> None:
    r = vllm.resolve([M, *words], v("0.33.0"))
    assert r.ok and r.get(dest) == value and r.is_set(dest)


def test_the_release_decides_the_human_readable_forms() -> None:
    """``human_readable_int_or_auto`` from 0.14; ``t`` / ``T`` in the suffix tables from 0.13."""
    assert vllm.resolve([M, "--max-model-len", "auto"], v("0.13.0")).errors == (
        "vllm serve: error: argument --max-model-len: invalid human_readable_int value: 'auto'",)
    assert not vllm.resolve([M, "--max-num-batched-tokens", "1t"], v("0.12.0")).ok
    assert vllm.resolve([M, "--max-num-batched-tokens", "1t"], v("0.13.0")).get("max_num_batched_tokens") == 10**12
    assert vllm.resolve([M, "--max-model-len", "1.5K"], v("0.33.0")).errors == (
        "vllm serve: error: argument --max-model-len: Decimals are not allowed with binary suffixes like K. Did "
        "you mean to use 1.5k instead?",)


def test_the_release_decides_what_minus_o_means() -> None:
    assert vllm.resolve([M, "-O3"], v("0.10.2")).get("compilation_config") == {"level": 3}
    assert vllm.resolve([M, "-O3"], v("0.11.1")).get("compilation_config") == {"mode": 3}
    assert vllm.resolve([M, "-O", "2"], v("0.33.0")).get("optimization_level") == "2"


def test_the_release_decides_what_dash_dash_model_does() -> None:
    assert vllm.resolve(["--model", M], v("0.10.2")).errors[0].startswith(
        "ValueError: With `vllm serve`, you should provide the model as a positional argument")
    assert vllm.resolve(["--model", M], v("0.33.0")).get("model_tag") == M
    assert vllm.resolve(["--served-model-name", "a"], v("0.33.0")).errors[0].startswith(
        "ValueError: `model` should be provided as the first positional argument")


def test_a_config_file_is_merged_under_the_command_line(tmp_path: Path) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text("tensor-parallel-size: 4\nenforce-eager: true\nmax-num-seqs: 16\n")
    r = vllm.resolve([M, "--config", str(cfg), "-tp", "2"], v("0.33.0"))
    assert (r.get("tensor_parallel_size"), r.get("enforce_eager"), r.get("max_num_seqs")) == (2, True, 16)
    assert vllm.resolve([M, "--config", str(tmp_path / "x.json")], v("0.33.0")).errors == (
        "ValueError: Config file must be of a yaml/yml type. json supplied",)


def test_defaults_are_the_releases_own() -> None:
    r = vllm.resolve([M], v("0.33.0"))
    assert (r.get("tensor_parallel_size"), r.get("dtype"), r.get("enforce_eager")) == (1, "auto", False)
    assert not r.is_set("tensor_parallel_size") and r.is_set("model_tag")
    old = vllm.resolve([M], v("0.8.5"))
    assert old.get("swap_space") == 4 and old.get("gpu_memory_utilization") == 0.9


def test_a_release_without_its_own_table_is_judged_by_the_nearest_below() -> None:
    r = vllm.resolve([M], v("0.10.3"))
    assert r.release == "0.10.2" and "nearest release below" in r.release_note
    old = vllm.resolve([M], v("0.7.3"))
    assert old.release == "0.8.0" and "older than every table" in old.release_note
    assert vllm.resolve([M], v("0.33.0")).release_note == ""


# -- SGLang ------------------------------------------------------------------------------------------------------------
def test_sglang_cuda_graph_max_bs_split_into_decode_and_prefill() -> None:
    old = sglang.resolve(["--model-path", M, "--cuda-graph-max-bs", "8"], v("0.5.19"))
    assert old.ok and old.get("cuda_graph_max_bs_decode") == 8  # a deprecated alias there
    new = sglang.resolve(["--model-path", M, "--cuda-graph-max-bs", "8"], v("0.5.23"))
    assert new.errors == ("sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
                          "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",)


def test_sglang_retired_flags_in_each_releases_words() -> None:
    old = sglang.resolve(["--model-path", M, "--enable-flashinfer-mla"], v("0.4.6"))
    assert old.errors == ("ValueError: --enable-flashinfer-mla is deprecated. Please use '--attention-backend "
                          "flashinfer' instead.",)
    new = sglang.resolve(["--model-path", M, "--enable-flashinfer-mla"], v("0.5.23"))
    assert new.errors == ("sglang serve: error: unrecognized arguments: --enable-flashinfer-mla",)
    assert new.hints == ("--enable-flashinfer-mla was removed in SGLang 0.4.7.post1 (last accepted by 0.4.7)",)


def test_sglang_values_and_required_model() -> None:
    r = sglang.resolve(["--model-path", M, "--tp", "8", "--dp", "8", "--enable-dp-attention",
                        "--context-length", "128k"], v("0.5.23"))
    assert (r.get("tp_size"), r.get("dp_size"), r.get("enable_dp_attention"), r.get("context_length")) == (
        8, 8, True, 128_000)
    assert sglang.resolve(["--model-path", M, "--context-length", "128k"], v("0.5.9")).errors == (
        "launch_server.py: error: argument --context-length: invalid int value: '128k'",)
    assert sglang.resolve(["--tp", "2"], v("0.5.23")).errors == (
        "sglang serve: error: the following arguments are required: --model-path/--model",)


# -- llama.cpp ---------------------------------------------------------------------------------------------------------
def test_llamacpp_reads_words_as_common_params_parse_ex_does() -> None:
    b = v("11434")
    assert llamacpp.resolve(["-m", "x.gguf", "--ctx_size", "4096"], b).get("ctx_size") == 4096
    assert llamacpp.resolve(["-m", "x.gguf", "-c", "4k"], b).get("ctx_size") == 4  # std::stoi
    assert llamacpp.resolve(["-m", "x.gguf", "-c", "x"], b).errors == ('error while handling argument "-c": stoi',)
    assert llamacpp.resolve(["-m", "x.gguf", "--ctx-siz", "1"], b).errors == ("error: invalid argument: --ctx-siz",)
    assert llamacpp.resolve(["-m", "x.gguf", "-no-kvu"], b).get("kv_unified") is False
    env = {"LLAMA_ARG_CTX_SIZE": "8192", "LLAMA_ARG_N_PARALLEL": "2"}
    r = llamacpp.resolve(["-m", "x.gguf", "-c", "4096"], b, env=env)
    assert (r.get("ctx_size"), r.get("parallel")) == (4096, 2)  # the command line wins over the variable
    between = llamacpp.resolve(["-m", "x.gguf"], v("11200"))
    assert between.release == "b11003" and "nearest release below" in between.release_note


# -- the releases' own type functions --------------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "error"), [
    # SGLang 0.5.23 model_executor/cuda_graph_config.py:237-243, utils/common.py:4818-4824
    ("--cuda-graph-backend-decode tc_piecewise", "argument --cuda-graph-backend-decode: tc_piecewise was removed; "
                                                 "select breakable, full, or disabled"),
    ("--forward-hooks [1", "argument --forward-hooks: Invalid JSON list: [1. Please provide a valid JSON list."),
])
def test_sglang_type_functions_refuse_in_their_words(line: str, error: str) -> None:
    flag, value = line.split(" ", 1)
    r = sglang.resolve(["--model-path", "m", flag, value], Version("0.5.23"))
    assert not r.ok and error in r.errors[0]


def test_a_type_function_not_rebuilt_is_named_not_passed_in_silence() -> None:
    """--cuda-graph-config's parse_cuda_graph_config_arg checks phases and keys per release (0.5.23
    cuda_graph_config.py:246-280): not rebuilt here, so the line is taken, and the flag is named as unchecked, which
    the config check says (a warning, not a pass)."""
    ok = sglang.resolve(["--model-path", "m", "--forward-hooks", "[]", "--cuda-graph-backend-decode", "full"],
                        Version("0.5.23"))
    assert ok.ok and ok.unchecked == ()
    r = sglang.resolve(["--model-path", "m", "--cuda-graph-config", '{"bogus": {}}'], Version("0.5.23"))
    assert r.ok and r.unchecked == ("--cuda-graph-config (parse_cuda_graph_config_arg)",)
    v = vllm.resolve(["Qwen/Qwen3-8B", "--reasoning-parser", "None"], Version("0.33.0"))
    assert v.ok and v.get("reasoning_parser") == "" and v.unchecked == ()  # vllm 0.33.0 arg_utils.py:188-190
