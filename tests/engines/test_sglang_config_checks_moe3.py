"""SGLang's EP dispatch without an all-to-all backend, the removed EPLB balancedness variable and the native gRPC
port (``engines/sglang/rules_moe3.py``), each in the release's words at its line, beside the same line accepted
(another flag, environment or release). The line is parsed by the release's own parser (``engines/sglang/cli.py
resolve``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_moe3
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

QWEN_MOE = "Qwen/Qwen3-30B-A3B"
MODELS = Path(__file__).resolve().parent.parent / "data" / "models"
NEMOTRON = str(MODELS / "nemotron-h-8b")     # NemotronHForCausalLM
H100 = (9, 0)


def judge(version: str, words: list[str], env: dict[str, str] | None = None, name: str = QWEN_MOE) -> Judged:
    line = resolve(["--model-path", "m", *words], Version(version))
    assert line.ok, line.errors
    return config_check(line, load_model(name), Layout(8, 1, 1, H100, "NVIDIA H100 80GB HBM3", 81559, 1),
                        Version(version), env or {})


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: tuple[str, ...]
    refused: str | None = None          # the release's words; None: accepted
    source: str = ""                    # file:line in that release
    env: tuple[tuple[str, str], ...] = ()
    model: str = QWEN_MOE


SA = "sglang/srt/server_args.py"
PH = "sglang/srt/arg_groups/parallel_hook.py"
RD = rules_moe3.DISPATCH_RULE
BM = rules_moe3.BALANCEDNESS_RULE
GP = rules_moe3.GRPC_RULE
STATIC = ("--ep-dispatch-algorithm static picks a different physical replica per rank, which only holds up when an "
          "a2a backend routes each token to a single rank. Use --ep-dispatch-algorithm dynamic with "
          "--moe-a2a-backend none.")
LP = STATIC.replace("algorithm static picks", "algorithm lp picks")
EP = ("--ep-size", "8")
BALANCED = "SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC is no longer supported. Use --expert-balancedness-report-mode"
METRIC = (("SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC", "0"),)
RM = rules_moe3.REMAP_RULE
NH = "sglang/srt/arg_groups/model_overrides/nemotron_h.py"
TRTLLM = ("flashinfer_trtllm routes inside the kernel and does not support EPLB or redundant experts on Nemotron-H; "
          "use --moe-runner-backend flashinfer_trtllm_routed.")
CUTEDSL = "flashinfer_cutedsl without an a2a backend does not migrate its expert scales on EPLB rebalance"
GRPC_ON = (("SGLANG_ENABLE_GRPC", "1"), ("SGLANG_GRPC_PORT", "30000"))

CASES = [
    # -- a per-rank replica pick without an all-to-all backend
    Case(RD, "0.5.17", (*EP, "--ep-dispatch-algorithm", "static"), STATIC, f"{SA}:6826"),
    Case(RD, "0.5.18", (*EP, "--ep-dispatch-algorithm", "lp"), LP, f"{SA}:7047"),
    Case(RD, "0.5.19", (*EP, "--ep-dispatch-algorithm", "static"), STATIC, f"{PH}:551"),
    Case(RD, "0.5.23", (*EP, "--ep-dispatch-algorithm", "static", "--moe-a2a-backend", "none"), STATIC, f"{PH}:783"),
    Case(RD, "0.5.23", (*EP, "--ep-dispatch-algorithm", "dynamic")),                      # rank-invariant pick
    Case(RD, "0.5.23", (*EP, "--enable-eplb")),                  # SGLang's own pick for none is dynamic
    Case(RD, "0.5.18", (*EP, "--ep-dispatch-algorithm", "static", "--moe-a2a-backend", "deepep")),
    Case(RD, "0.5.16", (*EP, "--ep-dispatch-algorithm", "static")),           # not checked before 0.5.17
    # -- SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC, whatever its value
    Case(BM, "0.5.18", (), BALANCED, f"{SA}:7238", METRIC),
    Case(BM, "0.5.19", (), BALANCED, f"{PH}:635", METRIC),
    Case(BM, "0.5.20", (), BALANCED, f"{PH}:590", METRIC),
    Case(BM, "0.5.20", ()),                                                   # unset
    Case(BM, "0.5.21", (), env=METRIC),                                       # no longer read
    # -- the native gRPC port against --port
    Case(GP, "0.5.11", (), "SGLANG_GRPC_PORT (30000) must differ from --port (30000)", f"{SA}:6958", GRPC_ON),
    Case(GP, "0.5.15", ("--port", "31000"), "SGLANG_GRPC_PORT (31000) must differ from --port (31000)",
         f"{SA}:6722", (("SGLANG_ENABLE_GRPC", "true"), ("SGLANG_GRPC_PORT", "31000"))),
    Case(GP, "0.5.11", ("--port", "31000"), env=GRPC_ON),                     # another port
    Case(GP, "0.5.13", (), env=(("SGLANG_ENABLE_GRPC", "1"),)),               # --port + 10000
    Case(GP, "0.5.13", (), env=(("SGLANG_ENABLE_GRPC", "0"), ("SGLANG_GRPC_PORT", "30000"))),   # gRPC off
    Case(GP, "0.5.16", (), env=GRPC_ON),                                      # not checked from 0.5.16
    # -- Nemotron-H's expert remap against the MoE runner
    Case(RM, "0.5.23", ("--enable-eplb", "--moe-runner-backend", "flashinfer_trtllm"), TRTLLM, f"{NH}:154",
         model=NEMOTRON),
    Case(RM, "0.5.23", ("--ep-num-redundant-experts", "8", "--moe-runner-backend", "flashinfer_trtllm"), TRTLLM,
         f"{NH}:154", model=NEMOTRON),
    Case(RM, "0.5.23", ("--enable-eplb", "--moe-runner-backend", "flashinfer_cutedsl"), CUTEDSL, f"{NH}:164",
         model=NEMOTRON),
    Case(RM, "0.5.23", ("--enable-eplb", "--moe-runner-backend", "flashinfer_trtllm_routed"), model=NEMOTRON),
    Case(RM, "0.5.23", ("--moe-runner-backend", "flashinfer_trtllm"), model=NEMOTRON),        # no expert remap
    Case(RM, "0.5.23", ("--ep-num-redundant-experts", "8", "--moe-runner-backend", "flashinfer_cutedsl"),
         model=NEMOTRON),                                                     # cutedsl: only with EPLB
    Case(RM, "0.5.23", ("--enable-eplb", "--moe-runner-backend", "flashinfer_trtllm")),   # not Nemotron-H
    Case(RM, "0.5.22", ("--enable-eplb", "--moe-runner-backend", "flashinfer_trtllm"), model=NEMOTRON),
]


def _id(case: Case) -> str:
    return f"{case.rule}-{case.version}-{'refused' if case.refused else 'accepted'}-{' '.join(case.words)}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, list(case.words), dict(case.env), case.model)
    if case.refused is None:
        assert_verdict(judged, case.rule, None, exception="ValueError", version=case.version)
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged
        return
    assert_verdict(judged, case.rule, case.refused, exception="ValueError", version=case.version,
                   source=case.source)


def test_every_rule_has_a_refused_and_an_accepted_case_on_two_releases() -> None:
    for rule in rules_moe3.RULES:
        refused = {c.version for c in CASES if c.rule == rule and c.refused is not None}
        accepted = [c for c in CASES if c.rule == rule and c.refused is None]
        assert refused and accepted, rule
        assert len(refused | {c.version for c in accepted}) >= 2, rule


def test_an_all_to_all_backend_sglang_rewrites_leaves_the_dispatch_check_not_judged() -> None:
    # --enable-waterfill sets the all-to-all backend itself (rules_parallel2): the pick's rank invariance is unknown
    line = resolve(["--model-path", "m", *EP, "--ep-dispatch-algorithm", "static", "--dwdp-size", "2"],
                   Version("0.5.23"))
    if not line.ok:
        pytest.skip(str(line.errors))
    judged = config_check(line, load_model(QWEN_MOE), Layout(8, 1, 1, H100, "NVIDIA H100 80GB HBM3", 81559, 1),
                          Version("0.5.23"), {})
    assert not [r for r in judged.refusals if r.rule == RD]
    assert any(RD in n for n in judged.not_judged), judged.not_judged


@pytest.mark.parametrize("env", [{"SGLANG_ENABLE_GRPC": "maybe", "SGLANG_GRPC_PORT": "30000"},
                                 {"SGLANG_ENABLE_GRPC": "1", "SGLANG_GRPC_PORT": "x"}])
def test_a_grpc_variable_the_release_cannot_parse_is_not_judged(env: dict[str, str]) -> None:
    judged = judge("0.5.11", [], env)
    assert not [r for r in judged.refusals if r.rule == GP]
    assert any(GP in n for n in judged.not_judged), judged.not_judged


def test_env_bool_and_grpc_port_follow_the_release() -> None:
    assert rules_moe3.env_bool({}, "X", False) is False
    assert rules_moe3.env_bool({"X": "Y"}, "X", False) is True
    assert rules_moe3.env_bool({"X": "off"}, "X", False) is None
    assert rules_moe3.grpc_port({}, 30000) == 40000
    assert rules_moe3.grpc_port({"SGLANG_GRPC_PORT": "123"}, 30000) == 123
