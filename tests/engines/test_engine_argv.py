"""``launch.args`` read with each engine's own spelling rules (issue 24, item 4): vLLM's
``FlexibleArgumentParser`` (``_`` for ``-``, argparse prefixes), SGLang's plain argparse (prefixes, no ``_``),
llama.cpp's exact spellings; and the release's flag tables that ``tools/engine_flags.py`` extracted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.engines.sglang import cli as sglang_cli
from pytest_gpulayout.engines.vllm import cli as vllm_cli
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.engine_args import loopback
from pytest_gpulayout.manifest.load import load_manifest

VLLM, SGLANG, LLAMACPP = ENGINES["vllm"], ENGINES["sglang"], ENGINES["llamacpp"]


@pytest.mark.parametrize("args", [["--tensor_parallel_size", "3"], ["--tensor-para", "3"], ["--tensor-para=3"],
                                  ["-tp", "3"], ["--tensor-parallel-size=3"]])
def test_vllm_reads_every_spelling_of_tp(args: list[str]) -> None:
    parsed = VLLM.cli.parse_args(args)
    assert parsed.value("--tensor-parallel-size") == "3" and not parsed.unknown


def test_sglang_takes_prefixes_and_aliases_but_not_underscores() -> None:
    assert SGLANG.cli.parse_args(["--tensor-parallel-size", "2"]).value("--tp-size") == "2"
    assert SGLANG.cli.parse_args(["--tp", "2"]).value("--tp-size") == "2"
    bad = SGLANG.cli.parse_args(["--tp_size", "2"])
    assert bad.unknown == ("--tp_size",)
    assert bad.usage_error() == "unrecognized arguments: --tp_size; did you mean --tp-size?"


def test_unknown_and_ambiguous_flags_get_argparse_words() -> None:
    typo = VLLM.cli.parse_args(["--tensor-paralel-size", "2"])
    assert typo.usage_error() == ("unrecognized arguments: --tensor-paralel-size; "
                                  "did you mean --tensor-parallel-size?")
    ambiguous = VLLM.cli.parse_args(["--max-num", "8"])
    assert (ambiguous.usage_error() or "").startswith("ambiguous option: --max-num could match")


def test_no_switch_is_not_the_switch() -> None:
    """BooleanOptionalAction's ``--no-enforce-eager`` does not turn eager mode on."""
    assert not VLLM.cli.knobs(["--no-enforce-eager"], {}).enforce_eager
    assert VLLM.cli.knobs(["--enforce_eager"], {}).enforce_eager


def test_knobs_read_underscore_and_prefix_spellings() -> None:
    k = VLLM.cli.knobs(["--max_num_seqs", "8", "--max-num-batched=4096", "--foo_bar", "1"], {})
    assert (k.max_num_seqs, k.max_num_batched_tokens) == (8, 4096)
    assert k.not_modelled == ("--foo_bar",)


def test_llamacpp_takes_exact_spellings_after_its_underscore_rewrite() -> None:
    """``common_params_parse_ex`` turns ``_`` into ``-`` in a ``--`` word (every build b9093 - b11434), then
    wants an exact spelling: no prefixes."""
    assert LLAMACPP.cli.parse_args(["-c", "4096"]).value("--ctx-size") == "4096"
    assert LLAMACPP.cli.parse_args(["--ctx_size", "4096"]).value("--ctx-size") == "4096"
    assert LLAMACPP.cli.parse_args(["--ctx-siz", "4096"]).unknown == ("--ctx-siz",)


def test_loopback() -> None:
    assert all(loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]"))
    assert not any(loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com"))


def _manifest(tmp_path: Path, engine: str, args: list[str]) -> Path:
    p = tmp_path / "gpulayout.yaml"
    p.write_text(f"version: 1\nmachine: preset:8xH100-SXM\ndeployments:\n  a:\n    engine: {engine}\n"
                 f"    model: Qwen/Qwen3-8B\n    launch: {{args: {json.dumps(args)}}}\n")
    return p


@pytest.mark.parametrize(("engine", "args", "shown"), [
    ("vllm", ["--tensor_parallel_size", "3"], "--tensor_parallel_size (= --tensor-parallel-size)"),
    ("vllm", ["--tensor-para", "3"], "--tensor-para (= --tensor-parallel-size)"),
    ("vllm", ["--pipeline_parallel_size=2"], "--pipeline_parallel_size (= --pipeline-parallel-size)"),
    ("vllm", ["--gpu_memory_util", "0.5"], "--gpu_memory_util (= --gpu-memory-utilization)"),
    ("sglang", ["--tensor-parallel-size", "2"], "--tensor-parallel-size (= --tp-size)"),
    ("sglang", ["--mem-fraction", "0.5"], "--mem-fraction (= --mem-fraction-static)"),
])
def test_manifest_refuses_owned_flags_in_any_spelling(tmp_path: Path, engine: str, args: list[str],
                                                      shown: str) -> None:
    with pytest.raises(InputError, match="which the manifest key") as err:
        load_manifest(_manifest(tmp_path, engine, ["--enforce-eager", *args]))
    assert f"launch.args[1]: sets {shown}" in str(err.value)


@pytest.mark.parametrize("args", [["--hos=0.0.0.0"], ["--host", "0.0.0.0"], ["--ho", "::"]])
def test_manifest_refuses_a_host_beyond_loopback(tmp_path: Path, args: list[str]) -> None:
    with pytest.raises(InputError) as err:
        load_manifest(_manifest(tmp_path, "vllm", args))
    text = str(err.value)
    assert "would listen beyond loopback" in text and "\n" not in text


def test_release_tables_list_the_flags() -> None:
    v = vllm_cli.TABLES.table("0.33.0")
    s = sglang_cli.TABLES.table("0.5.23")
    tp = v.option("-tp")
    assert tp is not None and (tp.flags, tp.dest, tp.type) == (("--tensor-parallel-size", "-tp"),
                                                                "tensor_parallel_size", "int")
    eager = v.option("--no-enforce-eager")
    assert eager is not None and eager.switch and eager.dest == "enforce_eager"
    tp_size = s.option("--tensor-parallel-size")
    assert tp_size is not None and tp_size.flags == ("--tp-size", "--tensor-parallel-size")
    assert len(v.options) > 250 and len(s.options) > 400
