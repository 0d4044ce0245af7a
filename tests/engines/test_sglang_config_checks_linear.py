"""SGLang's ReplaySSM refusals that read SGLANG_RAGGED_VERIFY_MODE or the PD role (``engines/sglang/rules_linear.py``),
each in the release's words at its line, beside the same line accepted (the static mode, DSPARK / DFLASH with a
ring-writing verify kernel, another PD role, or the flag off). The line is parsed by the release's own parser
(``engines/sglang/cli.py resolve``); the launch environment is the deployment's."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_linear
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

#: the model configs of tests/data/models, wherever the tests are started from
MODELS_DIR = str(Path(__file__).resolve().parents[1] / "data" / "models")

NEXT = f"{MODELS_DIR}/qwen3-next-80b-a3b-instruct"   # Qwen3-Next: hybrid linear attention (GDN)
RAGGED, PD = rules_linear.RAGGED, rules_linear.PD
HOOK = "sglang/srt/arg_groups/attention_hook.py"
SERVER = "sglang/srt/server_args.py"
CAP = {"SGLANG_RAGGED_VERIFY_MODE": "cap-accept"}
COMPACT = {"SGLANG_RAGGED_VERIFY_MODE": "compact"}


def judge(version: str, words: str, env: dict[str, str]) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    layout = Layout(4, 1, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559)
    return config_check(line, load_model(NEXT), layout, Version(version), env)


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    refused: str | None = None          # the release's words; None: accepted
    source: str = ""                    # file:line in that release
    env: dict[str, str] = field(default_factory=dict)


SPEC = "--enable-linear-replayssm-spec --speculative-algorithm"

CASES = [
    # -- ragged verify: DSPARK / DFLASH with a ring-writing verify kernel, or the static mode
    Case(RAGGED, "0.5.23", f"{SPEC} EAGLE",
         "--enable-linear-replayssm-spec with SGLANG_RAGGED_VERIFY_MODE=cap-accept requires the KDA "
         "fold-every-commit family (DSPARK/DFLASH) and a ring-writing verify kernel (--linear-attn-verify-backend "
         "triton or nv_cutedsl); got algorithm='EAGLE', verify=None. Use SGLANG_RAGGED_VERIFY_MODE=static.",
         f"{HOOK}:484", CAP),
    Case(RAGGED, "0.5.23", f"{SPEC} DFLASH --linear-attn-verify-backend flashinfer",
         "got algorithm='DFLASH', verify='flashinfer'.", f"{HOOK}:484", COMPACT),
    Case(RAGGED, "0.5.23", f"{SPEC} DFLASH --linear-attn-verify-backend triton", env=CAP),
    Case(RAGGED, "0.5.23", f"{SPEC} EAGLE"),
    Case(RAGGED, "0.5.23", f"{SPEC} EAGLE", env={"SGLANG_RAGGED_VERIFY_MODE": "static"}),
    Case(RAGGED, "0.5.23", f"{SPEC} EAGLE", "got algorithm='EAGLE', verify=None.", f"{HOOK}:484",
         {**CAP, "SGLANG_ENABLE_PP_SPEC": "false"}),
    Case(RAGGED, "0.5.21", f"{SPEC} EAGLE", "got algorithm='EAGLE', verify=None.", f"{HOOK}:395",
         {**CAP, "SGLANG_ENABLE_PP_SPEC": "1"}),
    Case(RAGGED, "0.5.19", f"{SPEC} EAGLE", "SGLANG_RAGGED_VERIFY_MODE=compact requires", f"{HOOK}:417", COMPACT),
    Case(RAGGED, "0.5.17", f"{SPEC} EAGLE",
         "got algorithm='EAGLE', verify=None. Use SGLANG_RAGGED_VERIFY_MODE=static.", f"{SERVER}:6206", CAP),
    Case(RAGGED, "0.5.18", f"{SPEC} DSPARK --linear-attn-verify-backend triton", env=CAP),
    Case(RAGGED, "0.5.18", f"{SPEC} NEXTN --linear-attn-verify-backend triton",
         "got algorithm='NEXTN', verify='triton'.", f"{SERVER}:6422", CAP),
    # -- ReplaySSM under PD disaggregation
    Case(PD, "0.5.23", "--enable-linear-replayssm --disaggregation-mode decode",
         "--enable-linear-replayssm is not supported under PD disaggregation yet (follow-up). Got "
         "--disaggregation-mode='decode'.", f"{HOOK}:429"),
    Case(PD, "0.5.23", "--enable-linear-replayssm"),
    Case(PD, "0.5.23", "--disaggregation-mode decode"),
    Case(PD, "0.5.18", "--enable-linear-replayssm --disaggregation-mode prefill",
         "Got --disaggregation-mode='prefill'.", f"{SERVER}:6367"),
    Case(PD, "0.5.15", "--enable-linear-replayssm --disaggregation-mode prefill",
         "--enable-linear-replayssm is not supported under PD disaggregation yet", f"{SERVER}:4764"),
    Case(PD, "0.5.16", "--enable-gdn-replayssm-spec --disaggregation-mode decode",
         "--enable-gdn-replayssm-spec is not supported under PD disaggregation yet (follow-up). Got "
         "--disaggregation-mode='decode'.", f"{SERVER}:5398"),
    Case(PD, "0.5.16", "--enable-gdn-replayssm-spec"),
    Case(PD, "0.5.23", "--enable-linear-replayssm-spec --disaggregation-mode prefill",
         "--enable-linear-replayssm-spec is not supported on a PD prefill server: the ring is spec-verify-only "
         "scratch and the prefill server never runs spec verify.", f"{HOOK}:494"),
    Case(PD, "0.5.23", "--enable-linear-replayssm-spec --disaggregation-mode decode"),
    Case(PD, "0.5.17", "--enable-linear-replayssm-spec --disaggregation-mode prefill",
         "is not supported on a PD prefill server", f"{SERVER}:6216"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.version}-{c.words or 'plain'}-{c.env}")
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, case.words, case.env)
    assert_verdict(judged, case.rule, case.refused, exception="ValueError", version=case.version,
                   source=case.source)
    if case.refused is None:
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged


def test_every_rule_has_a_refused_and_an_accepted_case() -> None:
    for rule in rules_linear.RULES:
        refused = [c for c in CASES if c.rule == rule and c.refused]
        accepted = [c for c in CASES if c.rule == rule and not c.refused]
        assert refused and accepted, rule


@pytest.mark.parametrize("env", [{**CAP, "SGLANG_ENABLE_PP_SPEC": "1"}, {**CAP, "SGLANG_ENABLE_PP_SPEC": "on"},
                                 {"SGLANG_RAGGED_VERIFY_MODE": "sometimes"}])
def test_a_verify_backend_sglang_may_rewrite_or_an_unknown_mode_is_not_judged(env: dict[str, str]) -> None:
    judged = judge("0.5.23", f"{SPEC} EAGLE", env)
    assert not [r for r in judged.refusals if r.rule == RAGGED]
    assert any(rules_linear.RULES[RAGGED] in n for n in judged.not_judged), judged.not_judged


def test_a_kimi_model_whose_hook_pins_the_verify_backend_is_not_judged() -> None:
    line = resolve(["--model-path", "m", *f"{SPEC} EAGLE".split()], Version("0.5.23"))
    kimi = replace(load_model(NEXT), architectures=("KimiLinearForCausalLM",))
    judged = config_check(line, kimi, Layout(4, 1, 1, (9, 0), "NVIDIA GPU", 81559), Version("0.5.23"), CAP)
    assert not [r for r in judged.refusals if r.rule == RAGGED]
    assert any("verify backend" in n for n in judged.not_judged), judged.not_judged
