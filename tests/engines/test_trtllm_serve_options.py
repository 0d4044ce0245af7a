"""``trtllm-serve``'s options by release: the tables ``tools/engine_flags.py trtllm`` extracted from
``tensorrt_llm/commands/serve.py`` of four snapshots (``engines/trtllm/flags/releases.json``), the line read
with the deployment's table in click's own words, and the hand table where no table covers the release.

Sources (each table's ``source``): the main branch's ``Update TensorRT-LLM`` commits c629546c (0.15.0.dev2024111200),
535c9cc6 (0.16.0.dev2024111900), be178810 (0.17.0.dev2024121700), read from a fork's history
(aikitoria/TensorRT-LLM); ``third_party/tensorrt_llm`` of nctu6/vllm-tensorrt at 95c8e29a (1.3.0rc3). None is a
release tag: the version is what ``tensorrt_llm/version.py`` says at the same commit.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from pytest_gpulayout.deployment import Deployment, Launch
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.engines.trtllm import cli
from pytest_gpulayout.findings import Status
from pytest_gpulayout.inputs import click_parser
from pytest_gpulayout.inputs.flag_tables import Action, OptionSpec, ReleaseTable
from pytest_gpulayout.machine.presets import load_preset
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.runner import evaluate

MODELS = Path(__file__).parents[1] / "data" / "models"
TRTLLM = ENGINES["trtllm"]
RC3, DEV15 = "1.3.0rc3", "0.15.0.dev2024111200"


def _resolve(version: str | None, *words: str) -> Any:
    return TRTLLM.cli.resolve_args(["m", *words], Version(version) if version else None)


def _option(release: str, spelling: str) -> OptionSpec:
    o = cli.TABLES.table(release).option(spelling)
    assert o is not None, spelling
    return o


# -- the table against serve.py read by hand ----------------------------------------------------------------
def test_the_1_3_0rc3_table_is_what_its_serve_py_declares() -> None:
    """serve.py of 1.3.0rc3 (nctu6/vllm-tensorrt@95c8e29a, third_party/tensorrt_llm), read by hand:
    ``@click.option("--tensor_parallel_size", "--tp_size", type=int, default=1)`` at line 465,
    ``--free_gpu_memory_fraction`` / ``--kv_cache_free_gpu_memory_fraction`` float 0.9 at 502,
    ``--backend`` ``ChoiceWithAlias(["pytorch", "tensorrt", "_autodeploy"], {"trt": "tensorrt"})`` default
    "pytorch" at 417, ``--trust_remote_code`` ``is_flag`` at 515, ``--max_seq_len`` ``BuildConfig``'s default at
    458, ``--log_level`` ``click.Choice(severity_map.keys())`` (``tensorrt_llm/logger.py``) default "info" at
    436, ``--custom_module_dirs`` ``multiple=True`` at 425, ``--reasoning_parser`` a registry's keys at 536."""
    t = cli.TABLES.table(RC3)
    assert t.prog == "trtllm-serve serve" and len(t.options) == 34 and t.options[0].dest == "model"
    assert "95c8e29a28cb60170413e25671dffba8b68cd863" in t.source
    assert "version.py beside it says 1.3.0rc3, not a release tag" in t.source
    tp = _option(RC3, "--tp_size")
    assert (tp.flags, tp.dest, tp.type, tp.default, tp.at) == (
        ("--tensor_parallel_size", "--tp_size"), "tensor_parallel_size", "int", 1, "tensorrt_llm/commands/serve.py:465")
    frac = _option(RC3, "--kv_cache_free_gpu_memory_fraction")
    assert (frac.dest, frac.type, frac.default, frac.at) == (
        "free_gpu_memory_fraction", "float", 0.9, "tensorrt_llm/commands/serve.py:502")
    backend = _option(RC3, "--backend")
    assert (backend.choices, dict(backend.aliases), backend.default, backend.at) == (
        ("pytorch", "tensorrt", "_autodeploy"), {"trt": "tensorrt"}, "pytorch", "tensorrt_llm/commands/serve.py:417")
    trust = _option(RC3, "--trust_remote_code")
    assert (trust.action, trust.default, trust.at) == (Action.STORE_TRUE, False, "tensorrt_llm/commands/serve.py:515")
    seq = _option(RC3, "--max_seq_len")
    assert (seq.type, seq.has_default, seq.default_src) == (
        "int", False, "BuildConfig.model_fields['max_seq_len'].default")
    log = _option(RC3, "--log_level")
    assert log.choices == ("internal_error", "error", "warning", "info", "verbose", "debug", "trace")
    assert log.default == "info" and log.at == "tensorrt_llm/commands/serve.py:436"
    dirs = _option(RC3, "--custom_module_dirs")
    assert (dirs.action, dirs.default) == (Action.APPEND, [])
    assert _option(RC3, "--reasoning_parser").choices_unknown  # ReasoningParserFactory.parsers: filled at import
    assert _option(RC3, "--config").dest == "extra_llm_api_options"


def test_the_first_snapshots_are_one_command_with_twelve_options() -> None:
    """serve.py of 0.15.0.dev2024111200 (c629546c), read by hand: ``@click.command("trtllm-serve")``, the model
    and 11 options; ``--tp_size`` (line 44) and ``--kv_cache_free_gpu_memory_fraction`` (49) are their only
    spellings, ``--port`` int 8000 at 22. 0.16.0.dev2024111900 and 0.17.0.dev2024121700 have the same file."""
    for release in (DEV15, "0.16.0.dev2024111900", "0.17.0.dev2024121700"):
        t = cli.TABLES.table(release)
        assert t.prog == "trtllm-serve" and len(t.options) == 12
        assert "a development snapshot whose tensorrt_llm/version.py at that commit says" in t.source
        assert f"says {release}, not a release tag" in t.source
    tp = _option(DEV15, "--tp_size")
    assert (tp.flags, tp.dest, tp.at) == (("--tp_size",), "tp_size", "tensorrt_llm/commands/serve.py:44")
    frac = _option(DEV15, "--kv_cache_free_gpu_memory_fraction")
    assert (frac.type, frac.default, frac.at) == ("float", 0.9, "tensorrt_llm/commands/serve.py:49")
    port = _option(DEV15, "--port")
    assert (port.type, port.default, port.at) == ("int", 8000, "tensorrt_llm/commands/serve.py:22")
    assert cli.TABLES.table(DEV15).option("--tensor_parallel_size") is None
    assert cli.TABLES.table(DEV15).option("--backend") is None


# -- refused in click's words on one release, accepted on the release that has it ---------------------------
def test_a_spelling_one_snapshot_lacks_is_refused_there_and_taken_by_the_one_that_has_it() -> None:
    old = _resolve(DEV15, "--tensor_parallel_size", "2")
    assert not old.ok and old.release == DEV15
    assert old.errors == ("Error: No such option: --tensor_parallel_size",)
    assert old.hints == ("--tensor_parallel_size is an option of the trtllm-serve table of TensorRT-LLM 1.3.0rc3, "
                         "not of 0.15.0.dev2024111200",)
    new = _resolve(RC3, "--tensor_parallel_size", "2")
    assert new.ok and new.get("tensor_parallel_size") == 2 and new.is_set("tensor_parallel_size")
    assert _resolve(DEV15, "--tp_size", "2").get("tp_size") == 2  # its own spelling, its own destination


def test_a_misspelt_option_is_refused_with_clicks_close_matches() -> None:
    r = _resolve(RC3, "--max_seq_length", "4096")
    assert r.errors == ("Error: No such option: --max_seq_length (Possible options: --max_beam_width, --max_seq_len)",)
    assert _resolve(RC3, "--max_seq_len", "4096").get("max_seq_len") == 4096
    one = _resolve(RC3, "--tp-size", "2")  # one close match; click 8.4+ quotes the names
    assert one.errors == ("Error: No such option: --tp-size (Possible options: --ep_size, --pp_size, --tp_size)",)
    t = cli.TABLES.table(RC3)
    assert click_parser.parse(t, ["m", "--trust-remote-code"]).error == (
        "Error: No such option: --trust-remote-code Did you mean --trust_remote_code?")
    assert click_parser.parse(t, ["m", "--trust-remote-code"], click=Version("8.5.1")).error == (
        "Error: No such option '--trust-remote-code'. Did you mean '--trust_remote_code'?")


def test_a_choice_outside_click_choice_is_refused_and_an_alias_is_taken() -> None:
    r = _resolve(RC3, "--backend", "onnx")
    assert r.errors == ("Error: Invalid value for '--backend': 'onnx' is not one of 'pytorch', 'tensorrt', "
                        "'_autodeploy'.",)
    assert _resolve(RC3, "--backend", "trt").get("backend") == "tensorrt"   # ChoiceWithAlias
    assert _resolve(RC3, "--log_level", "warn").errors == (
        "Error: Invalid value for '--log_level': 'warn' is not one of 'internal_error', 'error', 'warning', "
        "'info', 'verbose', 'debug', 'trace'.",)
    assert _resolve(RC3, "--log_level", "warning").ok
    assert _resolve(RC3, "--reasoning_parser", "any-name").ok  # a registry's keys: not judged, never refused


def test_a_flag_given_a_value_and_a_bad_number_are_refused_in_clicks_words() -> None:
    assert _resolve(RC3, "--trust_remote_code=true").errors == (
        "Error: Option '--trust_remote_code' does not take a value.",)
    assert _resolve(RC3, "--tp_size", "two").errors == (
        "Error: Invalid value for '--tensor_parallel_size' / '--tp_size': 'two' is not a valid integer.",)
    assert _resolve(RC3, "--kv_cache_free_gpu_memory_fraction", "most").errors == (
        "Error: Invalid value for '--free_gpu_memory_fraction' / '--kv_cache_free_gpu_memory_fraction': 'most' is "
        "not a valid float.",)
    # click parses every word before it converts one: the unknown option is what it reports
    assert _resolve(RC3, "--tp_size", "two", "--bogus").errors == (
        "Error: No such option: --bogus Did you mean --host?",)
    ok = _resolve(RC3, "--tp_size", "4", "--kv_cache_free_gpu_memory_fraction", "0.8", "--trust_remote_code")
    assert ok.ok and (ok.get("tensor_parallel_size"), ok.get("free_gpu_memory_fraction"), ok.get("port")) == (
        4, 0.8, 8000)


# -- which table judges a release ---------------------------------------------------------------------------
@pytest.mark.parametrize(("version", "release", "note"), [
    (RC3, RC3, "judged by the trtllm-serve options of a snapshot whose tensorrt_llm/version.py says 1.3.0rc3, "
               "not a release tag"),
    ("1.3.0", RC3, "TensorRT-LLM 1.3.0 has no table of its own: judged by 1.3.0rc3, the nearest below in its "
                   "series"),
    ("0.16.0.dev2024121000", "0.16.0.dev2024111900", "judged by 0.16.0.dev2024111900, the nearest below"),
    # no table of the series: the hand table, and the note says why
    ("1.2.0rc2", "", "no trtllm-serve table covers TensorRT-LLM 1.2.0rc2"),
    ("1.3.0rc2", "", "no trtllm-serve table covers TensorRT-LLM 1.3.0rc2"),
    # a main-branch development snapshot never judges a release of its series (the release branch adds to it)
    ("0.17.0", "", "no trtllm-serve table covers TensorRT-LLM 0.17.0"),
    ("0.14.0", "", "tensorrt_llm/commands/serve.py is absent from the main branch before 0.15.0.dev2024111200"),
    (None, "", "no TensorRT-LLM version known"),
])
def test_the_release_fallback_is_named(version: str | None, release: str, note: str) -> None:
    r = _resolve(version, "--max_seq_length", "4096")
    assert r.release == release and note in r.release_note, r.release_note
    if release:  # a table: the misspelling is refused
        assert r.errors and r.errors[0].startswith("Error: No such option: --max_seq_length")
    else:        # the hand table: an option it does not list is not judged, never refused
        assert r.ok and "any other is not judged" in r.release_note


def test_the_one_command_snapshots_say_trtllm_serve_serve_does_not_start_them() -> None:
    r = _resolve(DEV15, "--tp_size", "1")
    assert r.ok and "without the serve subcommand, so only trtllm-serve MODEL starts it" in r.release_note


def test_parse_args_uses_the_releases_spellings() -> None:
    parsed = TRTLLM.cli.parse_args(["--tp_size", "2", "--tp", "2"], Version(RC3))
    assert parsed.value("--tensor_parallel_size") == "2" and parsed.unknown == ("--tp",)
    hand = TRTLLM.cli.parse_args(["--tp", "2"], Version("1.2.0rc2"))
    assert hand.unknown == ("--tp",) and hand.usage_error() is None  # the hand table is not every option


# -- through the config check -------------------------------------------------------------------------------
def _config(version: str, *args: str) -> Any:
    d = Deployment(name="t", model="x", engine="trtllm", engine_version=version, tensor_parallel_size=1, gpus=(0,),
                   launch=Launch(args=args))
    return evaluate(d, load_preset("8xH100-sxm"), load_model(str(MODELS / "llama-3.1-8b-fp8-kv")))["config"]


def test_the_config_check_fails_in_clicks_words_and_passes_the_neighbour() -> None:
    f = _config(RC3, "--max_seq_length", "4096")
    assert f.status is Status.FAIL
    assert ("TensorRT-LLM 1.3.0rc3 (judged by the trtllm-serve options of a snapshot whose tensorrt_llm/version.py "
            "says 1.3.0rc3, not a release tag) refuses the command line before it starts: Error: No such option: "
            "--max_seq_length (Possible options: --max_beam_width, --max_seq_len).") in f.message
    assert _config(RC3, "--max_num_tokens", "4096").status is Status.PASS
    later = _config("1.3.1", "--backend", "onnx")
    assert later.status is Status.FAIL and "judged by 1.3.0rc3, the nearest below in its series" in later.message
    assert _config("1.3.1", "--backend", "pytorch").status is Status.PASS


# -- the parser against click itself ------------------------------------------------------------------------
LINES = [
    ["m", "--max_seq_length", "10"], ["m", "--tp-size", "2"], ["m", "--tp", "2"], ["m", "-tp", "2"],
    ["m", "--tp_size", "x"], ["m", "--backend", "onnx"], ["m", "--backend", "trt"], ["--tp_size", "2"],
    ["m", "--tp_size"], ["m", "--trust_remote_code=1"], ["m", "extra"], ["m", "a", "b"], ["--tp_size", "x"],
    ["m", "--log_level", "warn"], ["m", "--free_gpu_memory_fraction", "abc", "--bogus"],
    ["m", "--port", "1", "--port", "x"], ["m", "--port", "x", "--port", "1"], ["m", "--ep_size=2", "--cp_size", "z"],
    ["m", "--help=1"], ["m", "--", "--x"], ["m", "--grpc", "--grpc"], ["m", "--extra_llm_api_options"],
    ["m", "--xx=1"], ["m", "--max_batch"], ["m", "--custom_module_dirs", "a", "--custom_module_dirs", "b"],
]


def _click_command(t: ReleaseTable) -> Any:
    click = pytest.importorskip("click")
    params: list[Any] = []
    for o in t.options:
        if o.positional:
            params.append(click.Argument([o.dest], type=str))
            continue
        kw: dict[str, Any] = {}
        if o.action is Action.STORE_TRUE:
            kw["is_flag"] = True
        elif o.type in ("int", "float"):
            kw["type"] = {"int": int, "float": float}[o.type]
        elif o.choices is not None and not o.choices_unknown:
            class WithAlias(click.Choice):  # type: ignore[misc]  # serve.py's ChoiceWithAlias
                def __init__(self, choices: list[str], aliases: dict[str, str]) -> None:
                    super().__init__(choices)
                    self.aliases = aliases

                def convert(self, value: Any, param: Any, ctx: Any) -> Any:
                    return super().convert(self.aliases.get(value, value), param, ctx)

            kw["type"] = WithAlias(list(o.choices), dict(o.aliases))
        if o.action is Action.APPEND:
            kw["multiple"] = True
        params.append(click.Option([*o.flags, o.dest], **kw))
    return click.Command("serve", params=params, callback=lambda **_: None)


@pytest.mark.parametrize("release", [RC3, DEV15])
def test_the_parser_says_what_the_installed_click_says(release: str) -> None:
    """The table's options as a real click command: every line refused or taken the same, in the same words
    (click 8.4+'s when the installed click is one)."""
    import click

    t = cli.TABLES.table(release)
    command = _click_command(t)
    installed = Version(importlib.metadata.version("click"))
    for line in LINES:
        try:
            command.main(list(line), standalone_mode=False, prog_name="trtllm-serve serve")
            real = ""
        except click.ClickException as e:
            real = f"Error: {e.format_message()}"
        assert click_parser.parse(t, line, click=installed).error == real, line
