"""pydantic's field constraints on vLLM's config classes (``engines/vllm/rules_fields.py``, 0.11+): each command
line read by the release's own parser, then held to the bounds, Literal choices and forbidden extra keys of the
fields its flags and JSON keys feed, as ``tools/config_fields.py`` read them in the unpacked wheels
(``vllm/config/scheduler.py``, ``speculative.py``, ``parallel.py``, ``cache.py``, ``attention.py``,
``structured_outputs.py``, ``lora.py``), refused in pydantic 2's words (checked against the CPU build of vLLM
0.32, whose pydantic prints them so). Each refusal has its accepted neighbour: the same line inside the bound, or
a release without it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import MappingProxyType

import pytest
from packaging.version import Version
from vllm_line_cases import LineCase, case_id, judge, layout

from pytest_gpulayout.engines.vllm import rules_fields
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import RULES, config_check
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.load import load_model

REPO = Path(__file__).resolve().parents[2]
WHEELS = Path("/work/wheels/src")
RULE = rules_fields.RULE
GE1 = "Input should be greater than or equal to 1 [type=greater_than_equal, input_value=0, input_type=int]"
GT0 = "Input should be greater than 0 [type=greater_than, input_value=0, input_type=int]"


def Case(version: str, line: str, refused: str | None = None, source: str | None = None) -> LineCase:
    return LineCase(RULE, version, line, layout(), refused=refused, source=source, exception="ValidationError")


def spec(**keys: object) -> str:
    return "--speculative-config " + json.dumps(keys, separators=(",", ":"))


def cfg(flag: str, **keys: object) -> str:
    return f"--{flag} " + json.dumps(keys, separators=(",", ":"))


NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}

CASES = [
    # config/scheduler.py:62 (0.32.0) max_num_seqs: int = Field(default=DEFAULT_MAX_NUM_SEQS, ge=1); argparse's
    # int takes 0; engine/arg_utils.py:2617 passes max_num_seqs=self.max_num_seqs. The default batch is derived
    # from it (:3167-3176: min(max_num_seqs * max_model_len, ...) = 0), so :48's max_num_batched_tokens ge=1
    # fails too, first in the class's order (as the CPU vLLM 0.32 says it)
    Case("0.32.0", "--max-num-seqs 0", "2 validation errors for SchedulerConfig\nmax_num_batched_tokens\n  " + GE1
         + "\nmax_num_seqs\n  " + GE1, "vllm/config/scheduler.py:48"),
    Case("0.32.0", "--max-num-seqs 0 --max-num-batched-tokens 8192",
         "1 validation error for SchedulerConfig\nmax_num_seqs\n  " + GE1, "vllm/config/scheduler.py:62"),
    Case("0.32.0", "--max-num-seqs 1"),
    # config/scheduler.py:37 / :44 (0.11.1); 0.11.0's fields have no bound (``max_num_seqs: int = None``)
    Case("0.11.1", "--max-num-seqs 0", "max_num_seqs\n  " + GE1, "vllm/config/scheduler.py:37"),
    Case("0.11.1", "--max-num-seqs 0 --max-num-batched-tokens 8192", "1 validation error for SchedulerConfig\n"
         "max_num_seqs\n  " + GE1, "vllm/config/scheduler.py:44"),
    Case("0.11.0", "--max-num-seqs 0"),
    Case("0.10.2", "--max-num-seqs 0"),  # plain dataclasses: nothing validated
    # config/cache.py:102 (0.32.0) gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)
    Case("0.32.0", "--gpu-memory-utilization 1.5",
         "1 validation error for CacheConfig\ngpu_memory_utilization\n  Input should be less than or equal to 1 "
         "[type=less_than_equal, input_value=1.5, input_type=float]", "vllm/config/cache.py:102"),
    Case("0.32.0", "--gpu-memory-utilization 0.95"),

    # config/speculative.py:393 (0.32.0) num_speculative_tokens: int = Field(default=None, gt=0), before
    # __post_init__ (SpeculativeConfig(**self.speculative_config), engine/arg_utils.py:2099)
    Case("0.32.0", spec(**{**NGRAM, "num_speculative_tokens": 0}),
         "1 validation error for SpeculativeConfig\nnum_speculative_tokens\n  " + GT0,
         "vllm/config/speculative.py:393"),
    Case("0.32.0", spec(**NGRAM)),
    # config/speculative.py:473 / :407 (0.32.0): prompt_lookup_min, draft_tensor_parallel_size ge=1
    Case("0.32.0", spec(**NGRAM, prompt_lookup_min=0), "prompt_lookup_min\n  " + GE1,
         "vllm/config/speculative.py:473"),
    Case("0.32.0", spec(**NGRAM, prompt_lookup_min=1)),
    Case("0.32.0", spec(**NGRAM, draft_tensor_parallel_size=0), "draft_tensor_parallel_size\n  " + GE1,
         "vllm/config/speculative.py:407"),
    Case("0.32.0", spec(**NGRAM, draft_tensor_parallel_size=1)),
    # config/speculative.py:97 (0.11.1) disable_by_batch_size: int | None = Field(default=None, ge=2); 0.11.0
    # has no bound there (its own raise, rule vllm.speculative.disable_by_batch_size, refuses it instead)
    Case("0.11.1", spec(**NGRAM, disable_by_batch_size=1),
         "disable_by_batch_size\n  Input should be greater than or equal to 2 [type=greater_than_equal, "
         "input_value=1, input_type=int]", "vllm/config/speculative.py:97"),
    Case("0.11.1", spec(**NGRAM, disable_by_batch_size=2)),
    Case("0.11.0", spec(**NGRAM, disable_by_batch_size=1)),
    # a key SpeculativeConfig does not have: refused where @config forbids extra keys (config/utils.py:71 in
    # 0.32.0: ConfigDict(extra="forbid"); the class at config/speculative.py:387), dropped in 0.15 (no forbid)
    Case("0.32.0", spec(**NGRAM, prompt_lookup_mn=1),
         "1 validation error for SpeculativeConfig\nprompt_lookup_mn\n  Unexpected keyword argument "
         "[type=unexpected_keyword_argument, input_value=1, input_type=int]", "vllm/config/speculative.py:387"),
    Case("0.15.0", spec(**NGRAM, prompt_lookup_mn=1)),
    # config/speculative.py:399 (0.32.0) method: SpeculativeMethod | None, a Literal that names other Literal
    # aliases (EagleModelTypes, MTPModelTypes ...): pydantic flattens them, in order
    Case("0.32.0", spec(method="eagle-3", num_speculative_tokens=3),
         "method\n  Input should be 'ngram', 'medusa', 'mlp_speculator', 'draft_model', 'suffix', 'custom_class', "
         "'eagle', 'eagle3', 'extract_hidden_states', 'deepseek_mtp', ", "vllm/config/speculative.py:399"),
    Case("0.32.0", spec(method="eagle-3", num_speculative_tokens=3),
         "'dflash', 'ngram_gpu' or 'dspark' [type=literal_error, input_value='eagle-3', input_type=str]"),
    # config/speculative.py:53 (0.11.0): no 'suffix' among the methods yet; 0.11.1 (:67) has it
    Case("0.11.0", spec(method="suffix", num_speculative_tokens=3), "method\n  Input should be 'ngram', 'eagle', "
         "'eagle3', 'medusa', 'mlp_speculator', 'draft_model', 'deepseek_mtp', ", "vllm/config/speculative.py:53"),
    Case("0.11.1", spec(method="suffix", num_speculative_tokens=3)),
    # every error of the class in one ValidationError, fields in their order, then the unknown keys
    Case("0.32.0", spec(method="ngram", num_speculative_tokens=0, prompt_lookup_max=4, prompt_lookup_min=0, x=1),
         "3 validation errors for SpeculativeConfig\nnum_speculative_tokens\n  " + GT0 + "\nprompt_lookup_min\n  "
         + GE1 + "\nx\n  Unexpected keyword argument [type=unexpected_keyword_argument, input_value=1, "
                 "input_type=int]", "vllm/config/speculative.py:393"),

    # config/parallel.py:66 (0.32.0) EPLBConfig.window_size: int = Field(default=1000, gt=0); --eplb-config is
    # parsed into the class (parse_dataclass, TypeAdapter(EPLBConfig).validate_json); 0.15.0's field: no bound
    Case("0.32.0", cfg("eplb-config", window_size=0),
         "1 validation error for EPLBConfig\nwindow_size\n  " + GT0, "vllm/config/parallel.py:66"),
    Case("0.32.0", cfg("eplb-config", window_size=500)),
    Case("0.15.0", cfg("eplb-config", window_size=0)),
    # config/attention.py:57 (0.32.0) flash_attn_version: Literal[2, 3, 4] | None; 0.15.0's is Literal[2, 3]
    # (config/attention.py:21)
    Case("0.15.0", cfg("attention-config", flash_attn_version=4),
         "1 validation error for AttentionConfig\nflash_attn_version\n  Input should be 2 or 3 "
         "[type=literal_error, input_value=4, input_type=int]", "vllm/config/attention.py:21"),
    Case("0.32.0", cfg("attention-config", flash_attn_version=4)),
    Case("0.32.0", cfg("attention-config", flash_attn_version=5), "Input should be 2, 3 or 4 [type=literal_error",
         "vllm/config/attention.py:57"),
    # config/structured_outputs.py:20 (0.32.0) backend: StructuredOutputsBackend (a Literal alias); vllm serve
    # validates it in StructuredOutputsConfig (parse_dataclass), the Python API in VllmConfig
    # ("structured_outputs_config.backend"): the words from the field on are the same
    Case("0.32.0", cfg("structured-outputs-config", backend="xgrammer"),
         "backend\n  Input should be 'auto', 'xgrammar', 'guidance', 'outlines' or 'lm-format-enforcer' "
         "[type=literal_error, input_value='xgrammer', input_type=str]", "vllm/config/structured_outputs.py:20"),
    Case("0.32.0", cfg("structured-outputs-config", backend="xgrammar")),
    # config/lora.py:35 (0.32.0) max_loras ge=1: LoRAConfig is built only with --enable-lora
    # (engine/arg_utils.py:2650-2668)
    Case("0.32.0", "--enable-lora --max-loras 0", "1 validation error for LoRAConfig\nmax_loras\n  " + GE1,
         "vllm/config/lora.py:35"),
    Case("0.32.0", "--max-loras 0"),
    Case("0.32.0", "--enable-lora --max-loras 2"),
    # config/parallel.py:385 (0.32.0) decode_context_parallel_size: int = Field(default=1, ge=1); 0.20.0's has no
    # bound (config/parallel.py:308): there ``tp % 0`` in its own check is not evaluated (named), not refused here
    Case("0.32.0", "--decode-context-parallel-size 0",
         "1 validation error for ParallelConfig\ndecode_context_parallel_size\n  " + GE1,
         "vllm/config/parallel.py:385"),
    Case("0.20.0", "--decode-context-parallel-size 0"),
    # config/scheduler.py:51 (0.11.1) max_num_partial_prefills ge=1, before SchedulerConfig's own checks
    Case("0.11.1", "--max-num-partial-prefills 0", "1 validation error for SchedulerConfig\n"
         "max_num_partial_prefills\n  " + GE1, "vllm/config/scheduler.py:51"),
    # config/vllm.py:124-136 / :427 (0.32.0): optimization_level is an OptimizationLevel (IntEnum 0-3), the
    # parser's --optimization-level a str; -O7, or 0.11's dotted -O.backend=... (now "-O" + a level), is refused
    Case("0.32.0", "-O7", "1 validation error for VllmConfig\noptimization_level\n  Input should be 0, 1, 2 or 3 "
         "[type=enum, input_value='7', input_type=str]", "vllm/config/vllm.py:427"),
    Case("0.32.0", "-O.backend=eager", "optimization_level\n  Input should be 0, 1, 2 or 3 [type=enum, "
         "input_value='.backend=eager', input_type=str]"),
    Case("0.32.0", "-O3"),
    Case("0.32.0", "-O 1"),
]


def test_the_rule_is_its_own() -> None:
    """Judged here, not over the ledger (pydantic's checks are no raise of the release)."""
    assert RULE in rules_fields.FIELD_RULES and RULE not in RULES


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case)


def test_a_release_between_listed_ones_is_answered_by_the_one_below() -> None:
    version = Version("0.32.1")
    args = resolve("--max-num-seqs 0".split(), version)
    mine = [r for r in config_check(args, load_model("Qwen/Qwen3-8B"), layout(), version).refusals if r.rule == RULE]
    assert mine and mine[0].release == "0.32.0" and mine[0].asked == "0.32.1"
    assert "(read in 0.32.0, the nearest listed release below it)" in mine[0].text("vLLM")


def test_the_classes_own_checks_are_not_reached_when_pydantic_refuses_it() -> None:
    """``SchedulerConfig`` is never built with ``max_num_partial_prefills=0`` (0.11.1): its ``verify_max_model_len``
    raise (rule vllm.scheduler.partial_prefills, config/scheduler.py:293) is said not reached, not given as the
    release's words; at 1 with no chunked prefill that raise is the refusal again."""
    version = Version("0.11.1")
    model = load_model("Qwen/Qwen3-8B")
    judged = config_check(resolve("--max-num-partial-prefills 0".split(), version), model, layout(), version)
    assert [r.rule for r in judged.refusals] == [RULE]
    assert any("vllm.scheduler.partial_prefills (vllm/config/scheduler.py:293) is not reached: pydantic refuses "
               "to build SchedulerConfig" in n for n in judged.not_judged)
    judged = config_check(resolve("--max-num-partial-prefills 2 --no-enable-chunked-prefill".split(), version),
                          model, layout(), version)
    assert "vllm.scheduler.partial_prefills" in [r.rule for r in judged.refusals]


def test_a_division_by_zero_in_a_release_check_is_named_not_a_crash() -> None:
    version = Version("0.20.0")
    judged = config_check(resolve("--decode-context-parallel-size 0".split(), version),
                          load_model("Qwen/Qwen3-8B"), layout(), version)
    assert any("tp_divisible_by_dcp" in n and "modulo by zero" in n for n in judged.not_judged)


def test_a_value_rewritten_before_pydantic_is_named_not_refused() -> None:
    """``CacheConfig.block_size`` has a ``field_validator(mode="before")`` (config/cache.py, 0.32.0): the line's 0
    may not be what pydantic sees, so it is said, not refused."""
    judged = rules_fields.check(resolve("--block-size 0".split(), Version("0.32.0")), Version("0.32.0"))
    assert not judged.refusals
    assert any("block_size" in n and "rewrites it" in n for n in judged.not_judged)


def test_a_condition_the_rule_cannot_read_is_named() -> None:
    version = Version("0.32.0")
    args = ResolvedArgs("vllm", "0.32.0", MappingProxyType({"max_loras": 0}), frozenset({"max_loras"}))
    judged = rules_fields.check(args, version)   # enable_lora absent: whether LoRAConfig is built is unknown
    assert not judged.refusals
    assert any("LoRAConfig is built only if self.enable_lora" in n for n in judged.not_judged)


def test_pydantics_words() -> None:
    """The templates of pydantic_core's ErrorType, as the CPU vLLM 0.32's pydantic 2.14 prints them."""
    fe = rules_fields.field_error
    assert fe("a", {"type": "float", "gt": 0.0, "le": 1.0}, 0).text() == (  # type: ignore[union-attr]
        "a\n  Input should be greater than 0 [type=greater_than, input_value=0, input_type=int]")
    assert fe("b", {"type": "float", "ge": 0.0, "lt": 1.0}, 1.0).text() == (  # type: ignore[union-attr]
        "b\n  Input should be less than 1 [type=less_than, input_value=1.0, input_type=float]")
    assert fe("c", {"literal": ["x"]}, "q").text() == (  # type: ignore[union-attr]
        "c\n  Input should be 'x' [type=literal_error, input_value='q', input_type=str]")
    assert fe("d", {"type": "list", "min_length": 1}, []).text() == (  # type: ignore[union-attr]
        "d\n  List should have at least 1 item after validation, not 0 [type=too_short, input_value=[], "
        "input_type=list]")
    assert fe("e", {"type": "int", "ge": 1}, 0.0).text() == (  # type: ignore[union-attr]
        "e\n  Input should be greater than or equal to 1 [type=greater_than_equal, input_value=0.0, "
        "input_type=float]")
    # what pydantic takes or refuses otherwise is not judged: a bool, a str for a bound, a type unlike the choices,
    # a non-integral float for an int (int_from_float), an open constraint, None
    assert fe("f", {"type": "int", "ge": 1}, True) is None
    assert fe("f", {"type": "int", "ge": 1}, "0") is None
    assert fe("f", {"literal": [1, 2]}, "3") is None
    assert fe("f", {"type": "int", "ge": 1}, 0.5) is None
    assert fe("f", {"open": "union of int, str", "ge": 1}, 0) is None
    assert fe("f", {"type": "int", "gt": 0}, None) is None


def test_nested_config_keys_are_checked_under_their_field() -> None:
    record = {"classes": {
        "Outer": {"at": "vllm/config/a.py:10", "forbid": True, "before": [],
                  "fields": {"inner": {"class": "Inner", "line": 12, "type": "Inner"}, "n": {}}},
        "Inner": {"at": "vllm/config/a.py:3", "forbid": True, "before": [],
                  "fields": {"k": {"type": "int", "gt": 0, "line": 5}}}}}
    found = rules_fields.keys_check(record, "Outer", {"inner": {"k": 0, "z": 1}, "bar": 2})
    assert [e.loc for e in found.errors] == ["inner.k", "inner.z", "bar"]
    assert [e.kind for e in found.errors] == ["greater_than", "unexpected_keyword_argument",
                                             "unexpected_keyword_argument"]


# -- the extractor ---------------------------------------------------------------------------------------------

sys.path.insert(0, str(REPO / "tools"))
import config_fields  # noqa: E402


def test_the_table_unpacks_and_counts() -> None:
    table = rules_fields.releases()
    assert min(table, key=Version) == "0.11.0" and "0.33.0" in table
    assert config_fields.constrained(table["0.11.0"]) == 19
    assert config_fields.constrained(table["0.32.0"]) == 156   # with OptimizationLevel and CompilationMode (IntEnum)
    assert table == config_fields.unpack(json.loads(rules_fields.TABLE.read_text()))


def test_vllm_032_read_by_hand() -> None:
    """vllm-0.32.0 as read in its files: config/scheduler.py:62 ``max_num_seqs: int = Field(default=
    DEFAULT_MAX_NUM_SEQS, ge=1)``, config/speculative.py:387 ``class SpeculativeConfig`` under ``@config`` (which
    merges ``ConfigDict(extra="forbid")``, config/utils.py:71), :407 ``draft_tensor_parallel_size: int | None =
    Field(default=None, ge=1)``, config/structured_outputs.py:20 ``backend: StructuredOutputsBackend`` (a Literal
    alias of :14), engine/arg_utils.py:2617 ``SchedulerConfig(..., max_num_seqs=self.max_num_seqs, ...)``,
    :2650-2668 ``LoRAConfig(...) if self.enable_lora else None``, :569 ``eplb_config: EPLBConfig`` (parsed into the
    class) and :2099 ``SpeculativeConfig(**self.speculative_config)``."""
    r = rules_fields.releases()["0.32.0"]
    sched = r["classes"]["SchedulerConfig"]
    assert sched["at"] == "vllm/config/scheduler.py:25" and sched["forbid"]
    assert sched["fields"]["max_num_seqs"] == {"ge": 1, "line": 62, "type": "int"}
    sc = r["classes"]["SpeculativeConfig"]
    assert sc["at"] == "vllm/config/speculative.py:387" and sc["forbid"]
    assert sc["fields"]["draft_tensor_parallel_size"] == {"ge": 1, "line": 407, "none": True, "type": "int"}
    assert sc["fields"]["target_model_config"]["open"] == "SkipValidation"
    assert r["classes"]["StructuredOutputsConfig"]["fields"]["backend"]["literal"] == [
        "auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"]
    assert ["SchedulerConfig", "max_num_seqs"] in r["flags"]["max_num_seqs"]
    assert ["LoRAConfig", "max_loras", ["self.enable_lora"]] in r["flags"]["max_loras"]
    assert r["json"]["eplb_config"] == {"class": "EPLBConfig", "at": "parse"}
    assert r["json"]["speculative_config"] == {"class": "SpeculativeConfig", "at": "create"}
    assert "max_num_seqs" not in r["reassigned"]     # only its ``is None`` defaults (:3110-3180)
    assert not rules_fields.releases()["0.15.0"]["classes"]["SpeculativeConfig"]["forbid"]


@pytest.mark.skipif(not (WHEELS / "vllm-0.32.0" / "vllm" / "config").is_dir(), reason="no unpacked vLLM 0.32.0")
def test_the_tool_reads_vllm_032_as_the_table_has_it() -> None:
    from flags_source import Sources
    assert config_fields.extract(Sources(WHEELS / "vllm-0.32.0")) == rules_fields.releases()["0.32.0"]


def test_the_tool_on_a_release_of_its_own(tmp_path: Path) -> None:
    """Aliases, Annotated bounds, pydantic's constrained types, Optional, extra keys forbidden by ``@config``, the
    keyword mappings and the conditions they are built under."""
    root = tmp_path / "vllm-0.99.0"
    (root / "vllm" / "config").mkdir(parents=True)
    (root / "vllm" / "engine").mkdir()
    (root / "vllm" / "config" / "utils.py").write_text(
        "from pydantic import ConfigDict\nfrom pydantic.dataclasses import dataclass\n"
        "def config(cls=None, *, config=None):\n    merged = ConfigDict(extra='forbid')\n"
        "    def decorator(cls):\n        return dataclass(cls, config=merged)\n    return decorator(cls)\n")
    (root / "vllm" / "config" / "a.py").write_text(
        "from typing import Annotated, Literal, Optional\nfrom pydantic import Field, PositiveInt, field_validator\n"
        "from vllm.config.utils import config\nMode = Literal['x', 'y']\nLIMIT = 8\n"
        "@config\nclass A:\n    n: int = Field(default=1, ge=1, le=LIMIT)\n    m: Optional[Mode] = None\n"
        "    p: PositiveInt = 1\n    q: Annotated[float, Field(gt=0.5)] = 1.0\n    r: int | str = 0\n"
        "    s: str = 'a'\n    t: int = Field(default=0, ge=0)\n"
        "    @field_validator('t', mode='before')\n    def _t(cls, v):\n        return v\n")
    (root / "vllm" / "engine" / "arg_utils.py").write_text(
        "from vllm.config.a import A\nclass EngineArgs:\n    n: int = 1\n    on: bool = False\n"
        "    def create_engine_config(self):\n        if self.n is None:\n            self.n = 2\n"
        "        a = A(n=self.n, m=self.m) if self.on else None\n        return A(p=self.p)\n")
    got = config_fields.extract(config_fields.Sources(root))
    a = got["classes"]["A"]
    assert a["forbid"] and a["before"] == ["t"] and a["at"] == "vllm/config/a.py:7"
    assert a["fields"]["n"] == {"ge": 1, "le": 8, "line": 8, "type": "int"}
    assert a["fields"]["m"] == {"literal": ["x", "y"], "none": True, "type": "Literal", "line": 9}
    assert a["fields"]["p"] == {"gt": 0, "type": "int", "line": 10}
    assert a["fields"]["q"] == {"gt": 0.5, "type": "float", "line": 11}
    assert a["fields"]["r"]["open"] == "union of int, str" and a["fields"]["s"] == {}
    assert got["flags"] == {"n": [["A", "n", ["self.on"]]], "m": [["A", "m", ["self.on"]]], "p": [["A", "p"]]}
    assert got["reassigned"] == []      # ``self.n = 2`` fills a None only


@pytest.mark.parametrize(("value", "words"), [
    ("{'mode':3}", "1 validation error for CompilationConfig\n  Invalid JSON: key must be a string at line 1 column 2 "
                   "[type=json_invalid, input_value=\"{'mode':3}\", input_type=str]"),
    ('{"level":3}', "1 validation error for CompilationConfig\nlevel\n  Unexpected keyword argument "
                    "[type=unexpected_keyword_argument, input_value=3, input_type=int]"),
])
def test_a_json_config_the_parser_builds_is_refused_in_pydantics_words(value: str, words: str) -> None:
    """``--compilation-config`` is ``TypeAdapter(CompilationConfig).validate_json`` in 0.32's parser
    (engine/arg_utils.py:363-368): its refusal is pydantic's, read with pydantic's own JSON reader (jiter: "key
    must be a string", not Python's "Expecting property name enclosed in double quotes"), as the CPU vLLM 0.32
    prints it."""
    args = resolve(["Qwen/Qwen3-8B", "--compilation-config", value], Version("0.32.0"))
    assert not args.ok
    assert args.errors[0] == f"vllm serve: error: argument --compilation-config/-cc: {words}"
    assert "\n" not in args.refusal()   # one line in the finding, pydantic's lines joined
