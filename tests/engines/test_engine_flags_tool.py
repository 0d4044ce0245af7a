"""``tools/engine_flags.py`` reads a parser from a wheel file (zipfile + ast, nothing imported), and the table it
writes parses a line the way that parser would (issue 29, item 1). The wheel here is a small one made for the
test, shaped like vLLM's: a ``serve`` subcommand, ``make_arg_parser``, ``EngineArgs.add_cli_args`` calling
``get_kwargs`` on a config dataclass, and a ``FlexibleArgumentParser``. llama.cpp's ``common/arg.cpp`` scanner
reads a made-up ``arg.cpp`` with the constructs the real one uses.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from pytest_gpulayout.inputs.flag_tables import ReleaseTables
from pytest_gpulayout.inputs.release_parser import parse

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import flags_llamacpp  # noqa: E402

FILES = {
    "vllm/__init__.py": "",
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": """
        from vllm.entrypoints.openai.cli_args import make_arg_parser

        class ServeSubcommand:
            name = "serve"

            def subparser_init(self, subparsers):
                serve_parser = subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]")
                serve_parser.add_argument("model_tag", type=str, nargs="?")
                return make_arg_parser(serve_parser)
    """,
    "vllm/entrypoints/openai/__init__.py": "",
    "vllm/entrypoints/openai/cli_args.py": """
        from vllm.engine.arg_utils import EngineArgs

        def make_arg_parser(parser):
            parser.add_argument("--port", type=int, default=8000)
            return EngineArgs.add_cli_args(parser)
    """,
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": """
        import argparse
        from dataclasses import dataclass, field, fields
        from typing import Literal

        def human_readable_int(value):
            decimal_multiplier = {"k": 10 ** 3}
            binary_multiplier = {"K": 2 ** 10}
            return int(value)

        def get_type_hints(type_hint):
            if get_origin(type_hint) in {Union, UnionType}:
                return set(get_args(type_hint))
            return {type_hint}

        def _compute_kwargs(cls):
            for field in fields(cls):
                type_hints = get_type_hints(field.type)
                if contains_type(type_hints, int):
                    if name == "max_model_len":
                        kwargs[name]["type"] = human_readable_int
            return kwargs

        def get_kwargs(cls):
            return _compute_kwargs(cls)

        @dataclass
        class ModelConfig:
            max_model_len: int | None = None
            dtype: Literal["auto", "half", "bfloat16"] = "auto"
            enforce_eager: bool = False
            served_model_name: list[str] = field(default_factory=list)

        class EngineArgs:
            @staticmethod
            def add_cli_args(parser):
                model_kwargs = get_kwargs(ModelConfig)
                group = parser.add_argument_group(title="ModelConfig")
                group.add_argument("--max-model-len", **model_kwargs["max_model_len"])
                group.add_argument("--dtype", **model_kwargs["dtype"])
                group.add_argument("--enforce-eager", **model_kwargs["enforce_eager"])
                group.add_argument("--served-model-name", **model_kwargs["served_model_name"])
                group.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
                return parser
    """,
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": """
        from argparse import ArgumentParser

        class FlexibleArgumentParser(ArgumentParser):
            def parse_args(self, args=None, namespace=None):
                pattern = re.compile(r"(?<=--)[^\\.]*")
                return super().parse_args(args, namespace)
    """,
}


def _wheel(tmp_path: Path) -> Path:
    path = tmp_path / "vllm-9.9.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in FILES.items():
            z.writestr(name, textwrap.dedent(text))
    return path


def test_the_tool_reads_a_parser_from_a_wheel_file(tmp_path: Path) -> None:
    out = tmp_path / "releases.json"
    run = subprocess.run([sys.executable, str(REPO / "tools" / "engine_flags.py"), "vllm", "--wheel",
                          str(_wheel(tmp_path)), "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    tables = ReleaseTables("vllm", "vLLM", out)
    t = tables.table("9.9.0")
    assert t.wheel == "vllm-9.9.0-py3-none-any.whl" and "vllm/engine/arg_utils.py" in t.read
    by = {o.key: o for o in t.options}
    assert list(by) == ["model_tag", "--port", "--max-model-len", "--dtype", "--enforce-eager",
                        "--served-model-name", "--tensor-parallel-size"]
    assert by["--max-model-len"].type == "optional(human_readable_int)"
    assert by["--dtype"].choices == ("auto", "bfloat16", "half") and by["--dtype"].default == "auto"
    assert by["--enforce-eager"].spellings == ("--enforce-eager", "--no-enforce-eager")
    assert by["--served-model-name"].nargs == "+"
    assert by["--tensor-parallel-size"].flags == ("--tensor-parallel-size", "-tp")
    assert by["--dtype"].at.startswith("vllm/engine/arg_utils.py:")
    good = parse(t, ["m", "--max-model-len", "4k", "--dtype", "half", "-tp", "2", "--no-enforce-eager"])
    assert not good.error and good.values["max_model_len"] == 4000 and good.values["tensor_parallel_size"] == 2
    assert good.given == frozenset({"model_tag", "max_model_len", "dtype", "tensor_parallel_size", "enforce_eager"})
    assert parse(t, ["m", "--dtype", "fp8"]).error.startswith(
        "vllm serve: error: argument --dtype: invalid choice: 'fp8'")


ARG_CPP = r'''
static std::initializer_list<enum llama_example> mm_examples = { LLAMA_EXAMPLE_MTMD, LLAMA_EXAMPLE_SERVER };

common_params_context common_params_parser_init(common_params & params, llama_example ex) {
    add_opt(common_arg(
        {"-c", "--ctx-size"}, "N",
        string_format("size of the context (default: %d)", params.n_ctx),
        [](common_params & params, int value) { params.n_ctx = value; }
    ).set_env("LLAMA_ARG_CTX_SIZE"));
    add_opt(common_arg(
        {"-kvu", "--kv-unified"},
        {"-no-kvu", "--no-kv-unified"},
        "use a unified KV buffer, \"shared\" by all sequences", // a comment, with "quotes"
        [](common_params & params, bool value) { params.kv_unified = value; }
    ).set_env("LLAMA_ARG_KV_UNIFIED"));
    if (ex == LLAMA_EXAMPLE_SERVER) {
        add_opt(common_arg(
            {"-np", "--parallel"}, "N", "server slots",
            [](common_params & params, int value) { params.n_parallel = value; }
        ).set_examples({LLAMA_EXAMPLE_SERVER}));
    } else {
        add_opt(common_arg(
            {"-np", "--parallel"}, "N", "parallel sequences",
            [](common_params & params, int value) { params.n_parallel = value; }
        ));
    }
    add_opt(common_arg(
        {"--mmproj-offload"}, "offload the projector",
        [](common_params & params) { params.mmproj_use_gpu = true; }
    ).set_examples(mm_examples));
    add_opt(common_arg(
        {"--cli-only"}, "V", "not for the server",
        [](common_params & params, const std::string & value) { params.x = value; }
    ).set_examples({LLAMA_EXAMPLE_CLI}));
}

static bool common_params_parse_ex(int argc, char ** argv, common_params_context & ctx_arg) {
    auto parse_cli_args = [&]() {
        if (arg.compare(0, arg_prefix.size(), arg_prefix) == 0) {
            std::replace(arg.begin(), arg.end(), '_', '-');
        }
    };
}
'''


def test_the_arg_cpp_scanner_keeps_what_llama_server_keeps() -> None:
    entries, features = flags_llamacpp.options(ARG_CPP)
    by = {e["flags"][0]: e for e in entries}
    assert list(by) == ["-c", "-kvu", "-np", "--mmproj-offload"]
    assert by["-c"]["type"] == "int" and by["-c"]["env"] == "LLAMA_ARG_CTX_SIZE" and by["-c"]["at"].endswith(":5")
    assert by["-kvu"]["negated"] == ["-no-kvu", "--no-kv-unified"] and by["-kvu"]["action"] == "negatable"
    assert by["--mmproj-offload"]["action"] == "store_true"
    assert features["underscore"] is True


SERVE_PY = '''
import click

@click.command("serve")
@click.argument("model", type=str)
@click.option("--tensor_parallel_size", "--tp_size", type=int, default=1)
@click.option("--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction", type=float, default=0.9)
@click.option("--backend", type=ChoiceWithAlias(["pytorch", "tensorrt"], {"trt": "tensorrt"}), default="pytorch")
@click.option("--trust_remote_code", is_flag=True, default=False)
@click.option("--config", "--extra_llm_api_options", "extra_llm_api_options", type=str, default=None)
def serve(model, tensor_parallel_size, free_gpu_memory_fraction, backend, trust_remote_code,
          extra_llm_api_options):
    pass
'''


def test_trtllm_serve_options_and_clicks_reading() -> None:
    import flags_trtllm

    from pytest_gpulayout.inputs import click_parser
    from pytest_gpulayout.inputs.flag_tables import table_of

    entries = flags_trtllm.options(SERVE_PY)
    t = table_of("trtllm", {"version": "1.0", "prog": "trtllm-serve serve", "options": entries})
    by = {o.dest: o for o in t.options}
    assert by["tensor_parallel_size"].flags == ("--tensor_parallel_size", "--tp_size")
    assert by["extra_llm_api_options"].flags == ("--config", "--extra_llm_api_options")
    ok = click_parser.parse(t, ["m", "--tp_size=2", "--backend", "trt", "--trust_remote_code"])
    assert not ok.error and (ok.values["tensor_parallel_size"], ok.values["backend"], ok.values["model"]) == (
        2, "tensorrt", "m")
    # click's _match_long_opt passes the close long spellings; its error hint names every spelling, as declared
    assert click_parser.parse(t, ["m", "--tp-size", "2"]).error == (
        "Error: No such option: --tp-size Did you mean --tp_size?")
    assert click_parser.parse(t, ["m", "--tp_size", "x"]).error == (
        "Error: Invalid value for '--tensor_parallel_size' / '--tp_size': 'x' is not a valid integer.")
    assert click_parser.parse(t, ["m", "--trust_remote_code=1"]).error == (
        "Error: Option '--trust_remote_code' does not take a value.")
    assert click_parser.parse(t, ["m", "--backend", "onnx"]).error == (
        "Error: Invalid value for '--backend': 'onnx' is not one of 'pytorch', 'tensorrt'.")
    assert click_parser.parse(t, ["--tp_size", "2"]).error == "Error: Missing argument 'MODEL'."
    assert click_parser.parse(t, ["m", "--tp_size"]).error == "Error: Option '--tp_size' requires an argument."
