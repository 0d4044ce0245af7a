"""SGLang's context parallelism, MoE data parallelism, KV cache sharding and elastic EP refusals by release
(``engines/sglang/rules_parallel2.py``): each line is parsed by the release's own parser tables, judged by the
release's conditions, and refused in its words at its file:line; each refusal has an accepted neighbour (the line
without the conflict, or a release without the check).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from packaging.version import Version
from sglang_line_cases import assert_verdict

from pytest_gpulayout.engines.sglang import rules_parallel2
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout

DENSE = "Qwen/Qwen3-8B"
MOE = "Qwen/Qwen3-30B-A3B"
MLA = "deepseek-ai/DeepSeek-V3"


def on(tp: int = 8, pp: int = 1, nodes: int = 1) -> Layout:
    return Layout(tp, pp, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559, nodes=nodes)


def judge(version: str, words: str, model: str = DENSE, layout: Layout | None = None) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    return config_check(line, load_model(model), layout or on(), Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    model: str = DENSE
    layout: Layout | None = None
    refused: str | None = None            # the release's words; None: the release accepts the line
    source: str = ""                      # file:line where it refuses
    exception: str = "AssertionError"


PH = "sglang/srt/arg_groups/parallel_hook.py"
SA = "sglang/srt/server_args.py"
MH = "sglang/srt/arg_groups/moe_hook.py"

CASES = [
    # --attn-cp-size must divide TP (0.5.9 - 0.5.13 spell it --attention-context-parallel-size)
    Case("sglang.cp.tp_divisible_by_cp", "0.5.23", "--attn-cp-size 3", refused="tp_size must be divisible by "
         "attn_cp_size", source=f"{PH}:159"),
    Case("sglang.cp.tp_divisible_by_cp", "0.5.9", "--attention-context-parallel-size 3",
         refused="tp_size must be divisible by attn_cp_size", source=f"{SA}:2086"),
    Case("sglang.cp.tp_divisible_by_cp", "0.5.23", "--attn-cp-size 2"),
    Case("sglang.cp.tp_divisible_by_cp", "0.5.9", "--attention-context-parallel-size 2"),
    # PP beside context parallelism: with --attn-cp-size in 0.5.9 only, with --moe-dp-size from 0.5.9 on
    Case("sglang.cp.pipeline", "0.5.9", "--attention-context-parallel-size 2", layout=on(tp=4, pp=2),
         refused="PP is not supported with context parallelism", source=f"{SA}:2092"),
    Case("sglang.cp.pipeline", "0.5.10", "--attention-context-parallel-size 2", layout=on(tp=4, pp=2)),
    Case("sglang.cp.pipeline", "0.5.23", "--moe-dp-size 2 --attn-cp-size 2", MOE, on(tp=4, pp=2),
         refused="PP is not supported with context parallelism", source=f"{PH}:178"),
    Case("sglang.cp.pipeline", "0.5.23", "--moe-dp-size 2 --attn-cp-size 2", MOE, on(tp=8)),
    # --moe-dp-size: divides TP, its product with EP is at most (and with EP, exactly) TP, and equals the CP size
    Case("sglang.moe_dp.layout", "0.5.23", "--moe-dp-size 3", MOE, refused="tp_size must be divisible by moe_dp_size",
         source=f"{PH}:172"),
    Case("sglang.moe_dp.layout", "0.5.23", "--moe-dp-size 2 --attn-cp-size 2 --ep-size 8", MOE,
         refused="ep_size * moe_dp_size must be less than or equal to tp_size", source=f"{PH}:175"),
    Case("sglang.moe_dp.layout", "0.5.23", "--moe-dp-size 2 --attn-cp-size 2 --ep-size 2", MOE,
         refused="ep_size * moe_dp_size must be equal to tp_size", source=f"{PH}:181"),
    Case("sglang.moe_dp.layout", "0.5.23", "--moe-dp-size 2 --attn-cp-size 2 --ep-size 4", MOE),
    Case("sglang.moe_dp.layout", "0.5.23", "--moe-dp-size 2 --attn-cp-size 2", MOE),
    Case("sglang.moe_dp.layout", "0.5.11", "--moe-data-parallel-size 2", MOE,
         refused="attn_cp_size != moe_dp_size is only supported when moe_dp_size == 1", source=f"{SA}:2924"),
    Case("sglang.moe_dp.layout", "0.5.10", "--moe-data-parallel-size 2", MOE),          # before the check
    Case("sglang.moe_dp.layout", "0.5.10", "--moe-data-parallel-size 2 --expert-parallel-size 2", MOE,
         refused="ep_size * moe_dp_size must be equal to tp_size"),
    # the aiter all-reduce fusion under context parallelism (0.5.10+; --enable-deterministic-inference turns it off)
    Case("sglang.cp.aiter_allreduce_fusion", "0.5.23", "--attn-cp-size 2 --enable-aiter-allreduce-fusion",
         refused="Aiter allreduce fusion is not supported with context parallelism", source=f"{PH}:166"),
    Case("sglang.cp.aiter_allreduce_fusion", "0.5.10",
         "--attention-context-parallel-size 2 --enable-aiter-allreduce-fusion",
         refused="Aiter allreduce fusion is not supported with context parallelism", source=f"{SA}:2610"),
    Case("sglang.cp.aiter_allreduce_fusion", "0.5.23", "--enable-aiter-allreduce-fusion"),
    Case("sglang.cp.aiter_allreduce_fusion", "0.5.23", "--attn-cp-size 2"),
    # --enable-prefill-cp needs --cp-strategy (0.5.14+)
    Case("sglang.prefill_cp.strategy", "0.5.23", "--enable-prefill-cp", refused="--cp-strategy must be set when "
         "--enable-prefill-cp is enabled.", source=f"{PH}:152", exception="ValueError"),
    Case("sglang.prefill_cp.strategy", "0.5.14", "--enable-prefill-cp", refused="--cp-strategy must be set when "
         "--enable-prefill-cp is enabled.", source=f"{SA}:4987", exception="ValueError"),
    Case("sglang.prefill_cp.strategy", "0.5.23", "--enable-prefill-cp --cp-strategy zigzag"),
    Case("sglang.prefill_cp.strategy", "0.5.14", "--enable-prefill-cp --cp-strategy interleave"),
    # KV cache sharding is for PD prefill workers only (0.5.22+)
    Case("sglang.kv_cache_sharding.pd_prefill", "0.5.23", "--enable-kv-cache-sharding",
         refused="--enable-kv-cache-sharding is only supported on PD prefill workers",
         source="sglang/srt/arg_groups/kv_shard_hook.py:100", exception="ValueError"),
    Case("sglang.kv_cache_sharding.pd_prefill", "0.5.22", "--enable-kv-cache-sharding",
         refused="--enable-kv-cache-sharding is only supported on PD prefill workers",
         source="sglang/srt/arg_groups/kv_shard_hook.py:61", exception="ValueError"),
    Case("sglang.kv_cache_sharding.pd_prefill", "0.5.23", "--enable-kv-cache-sharding --disaggregation-mode prefill"),
    Case("sglang.kv_cache_sharding.pd_prefill", "0.5.23", "--disaggregation-mode decode"),
    # elastic EP flags that need --elastic-ep-backend
    Case("sglang.elastic_ep.backend", "0.5.23", "--elastic-ep-join-mode recover", MOE,
         refused="--elastic-ep-join-mode requires --elastic-ep-backend to be set.", source=f"{PH}:547"),
    Case("sglang.elastic_ep.backend", "0.5.23", "--elastic-ep-join-mode recover --elastic-ep-backend mooncake", MOE),
    Case("sglang.elastic_ep.backend", "0.5.23", "--max-ep-size 16", MOE,
         refused="--max-ep-size requires --elastic-ep-backend to be set.", source=f"{PH}:567"),
    Case("sglang.elastic_ep.backend", "0.5.12", "--elastic-ep-rejoin", MOE,
         refused="Elastic EP rejoin requires elastic_ep_backend to be set.", source=f"{SA}:3329"),
    Case("sglang.elastic_ep.backend", "0.5.12", "--elastic-ep-rejoin --elastic-ep-backend mooncake", MOE),
    # from 0.5.16 the deprecated --elastic-ep-rejoin is --elastic-ep-join-mode recover first
    Case("sglang.elastic_ep.backend", "0.5.18", "--elastic-ep-rejoin", MOE,
         refused="--elastic-ep-join-mode requires --elastic-ep-backend to be set.", source=f"{SA}:7085"),
    Case("sglang.elastic_ep.backend", "0.5.18", "--elastic-ep-rejoin --elastic-ep-join-mode scale "
         "--elastic-ep-backend mooncake", MOE,
         refused="--elastic-ep-rejoin (deprecated) conflicts with --elastic-ep-join-mode scale.", source=f"{SA}:7065"),
    # elastic EP sizes, offsets and the joiner's node rank
    Case("sglang.elastic_ep.sizes", "0.5.23", "--elastic-ep-backend mooncake --max-ep-size 0", MOE,
         refused="--max-ep-size must be a positive integer.", source=f"{PH}:570"),
    Case("sglang.elastic_ep.sizes", "0.5.23", "--elastic-ep-backend mooncake --max-ep-size 8", MOE),
    Case("sglang.elastic_ep.sizes", "0.5.23", "--elastic-ep-join-rank-offset 8", MOE,
         refused="--elastic-ep-join-rank-offset is only valid with --elastic-ep-join-mode scale.", source=f"{PH}:561"),
    Case("sglang.elastic_ep.sizes", "0.5.23", "--elastic-ep-backend mooncake --elastic-ep-initial-size 8", MOE,
         refused="--elastic-ep-initial-size is only valid for an Elastic EP deployment with --max-ep-size larger than "
                 "its local TP size.", source=f"{PH}:578"),
    Case("sglang.elastic_ep.sizes", "0.5.23", "--elastic-ep-backend mooncake --max-ep-size 16", MOE),
    Case("sglang.elastic_ep.sizes", "0.5.23", "--elastic-ep-backend mooncake --elastic-ep-join-mode scale "
         "--elastic-ep-join-rank-offset 8", MOE,
         refused="Elastic EP scale-up requires one joining TP group at --node-rank 1 (got 0).", source=f"{PH}:551"),
    Case("sglang.elastic_ep.sizes", "0.5.23", "--elastic-ep-backend mooncake --elastic-ep-join-mode scale "
         "--elastic-ep-join-rank-offset 8 --node-rank 1", MOE, on(tp=8, nodes=2)),
    Case("sglang.elastic_ep.sizes", "0.5.16", "--elastic-ep-backend mooncake --elastic-ep-join-mode scale "
         "--node-rank 1", MOE, on(tp=8, nodes=2),
         refused="Elastic EP scale joiners require --elastic-ep-join-rank-offset set to the current effective EP "
                 "size."),
    # elastic EP with EPLB needs an elasticity-aware algorithm (auto picks one); PP 1 from 0.5.11
    Case("sglang.elastic_ep.eplb_pp", "0.5.23", "--elastic-ep-backend mooncake", MOE, on(tp=4, pp=2),
         refused="PP size should be set to 1 under elastic EP", source=f"{PH}:538"),
    Case("sglang.elastic_ep.eplb_pp", "0.5.9", "--elastic-ep-backend mooncake", MOE, on(tp=4, pp=2)),
    Case("sglang.elastic_ep.eplb_pp", "0.5.23", "--elastic-ep-backend mooncake --enable-eplb --ep-size 8 "
         "--eplb-algorithm deepseek", MOE,
         refused="Elastic EP requires eplb_algorithm to be set to 'auto' or 'elasticity_aware(_hierarchical)'.",
         source=f"{PH}:531"),
    Case("sglang.elastic_ep.eplb_pp", "0.5.23", "--elastic-ep-backend mooncake --enable-eplb --ep-size 8", MOE),
    Case("sglang.elastic_ep.eplb_pp", "0.5.9", "--elastic-ep-backend mooncake --enable-eplb --ep-size 8 "
         "--eplb-algorithm elasticity_aware_hierarchical", MOE,
         refused="Elastic EP requires eplb_algorithm to be set to 'auto' or 'elasticity_aware'."),
    Case("sglang.elastic_ep.eplb_pp", "0.5.23", "--elastic-ep-backend mooncake --enable-eplb --ep-size 8 "
         "--eplb-algorithm elasticity_aware_hierarchical", MOE),
    # the MoE all-to-all backends: the FlashInfer dispatch type, pplx, and the FlashInfer backends' attention-DP width
    Case("sglang.a2a.flashinfer_dispatch_type", "0.5.23", "--flashinfer-a2a-dispatch-type bf16", MOE,
         refused="--flashinfer-a2a-dispatch-type requires --moe-a2a-backend flashinfer.", source=f"{MH}:311",
         exception="ValueError"),
    Case("sglang.a2a.flashinfer_dispatch_type", "0.5.20", "--flashinfer-a2a-dispatch-type bf16", MOE,
         refused="--flashinfer-a2a-dispatch-type requires --moe-a2a-backend flashinfer.", source=f"{MH}:260",
         exception="ValueError"),
    Case("sglang.a2a.flashinfer_dispatch_type", "0.5.23",
         "--flashinfer-a2a-dispatch-type bf16 --moe-a2a-backend flashinfer --attn-dp-size 8", MOE),
    Case("sglang.a2a.flashinfer_dispatch_type", "0.5.23", "--flashinfer-a2a-dispatch-type auto", MOE),
    Case("sglang.a2a.pplx", "0.5.23", "--moe-a2a-backend pplx --deepep-mode normal --attn-dp-size 8", MOE,
         refused="moe_a2a_backend='pplx' only supports low-latency mode", source=f"{MH}:577", exception="ValueError"),
    Case("sglang.a2a.pplx", "0.5.23", "--moe-a2a-backend pplx", MOE,
         refused="moe_a2a_backend='pplx' requires attention DP with at least 2 groups (--attn-dp-size >= 2).",
         source=f"{MH}:591"),
    Case("sglang.a2a.pplx", "0.5.23", "--moe-a2a-backend pplx --attn-dp-size 8", MOE),
    Case("sglang.a2a.pplx", "0.5.18", "--moe-a2a-backend pplx", MOE,
         refused="moe_a2a_backend='pplx' requires --enable-dp-attention with at least 2 DP groups (--dp-size >= 2).",
         source=f"{SA}:6984"),
    Case("sglang.a2a.pplx", "0.5.18", "--moe-a2a-backend pplx --dp-size 8 --enable-dp-attention", MOE),
    Case("sglang.a2a.attn_dp_width", "0.5.23", "--moe-a2a-backend flashinfer_megamoe --attn-dp-size 4", MOE,
         refused="FlashInfer MegaMOE is only supported with --attn-dp-size equal to --tp-size", source=f"{MH}:325"),
    Case("sglang.a2a.attn_dp_width", "0.5.23", "--moe-a2a-backend flashinfer_megamoe --attn-dp-size 8", MOE),
    Case("sglang.a2a.attn_dp_width", "0.5.22", "--moe-a2a-backend flashinfer --attn-dp-size 4", MOE,
         refused="Flashinfer MoE A2A is only supported with --attn-dp-size equal to --tp-size", source=f"{MH}:408"),
    # 0.5.23 lets Muse Spark prefill run FlashInfer A2A at TP4/EP4 or TP8/EP8 (a check of its own, not judged here)
    Case("sglang.a2a.attn_dp_width", "0.5.23", "--moe-a2a-backend flashinfer --attn-dp-size 4", MOE),
    # DWDP: the size is TP's, and it refuses EPLB, PP, two-batch overlap and a PD decode worker (0.5.17+)
    Case("sglang.dwdp.layout", "0.5.23", "--dwdp-size 4", MOE, refused="dwdp_size (4) must equal tp_size (8)",
         source=f"{PH}:441"),
    Case("sglang.dwdp.layout", "0.5.17", "--dwdp-size 4", MOE, refused="dwdp_size (4) must equal tp_size (8)"),
    Case("sglang.dwdp.layout", "0.5.23", "--dwdp-size 8", MOE),
    Case("sglang.dwdp.layout", "0.5.23", "--dwdp-size 8 --disaggregation-mode decode", MOE,
         refused="DWDP requires --disaggregation-mode null or prefill"),
    Case("sglang.dwdp.layout", "0.5.23", "--dwdp-size 8 --enable-eplb --ep-size 8", MOE,
         refused="EPLB dynamic migration conflicts with static DWDP partitioning"),
    Case("sglang.dwdp.layout", "0.5.23", "--dwdp-size 4", MOE, on(tp=4, pp=2), refused="DWDP requires pp_size == 1"),
    Case("sglang.dwdp.layout", "0.5.18", "--dwdp-size 8 --enable-two-batch-overlap", MOE,
         refused="DWDP's prefetch event protocol does not support two-batch overlap"),
    Case("sglang.dwdp.layout", "0.5.23", "--dwdp-size 1 --enable-eplb --ep-size 8", MOE),   # off: returns at once
    # decode context parallelism's communication flags need --dcp-size > 1
    Case("sglang.dcp.comm_backend", "0.5.23", "--dcp-comm-backend a2a", refused="--dcp-comm-backend a2a only affects "
         "the decode context-parallel attention reduction", source=f"{PH}:252", exception="ValueError"),
    Case("sglang.dcp.comm_backend", "0.5.20", "--dcp-comm-backend fi_a2a", refused="--dcp-comm-backend fi_a2a only "
         "affects the decode context-parallel attention reduction", exception="ValueError"),
    Case("sglang.dcp.comm_backend", "0.5.23", "--dcp-comm-backend a2a --dcp-size 2"),
    # 0.5.17 - 0.5.19 make the same check (0.5.19 arg_groups/parallel_hook.py:137 handle_dcp_validation)
    Case("sglang.dcp.comm_backend", "0.5.19", "--dcp-comm-backend a2a", refused="--dcp-comm-backend a2a only affects "
         "the decode context-parallel attention reduction", source=f"{PH}:137", exception="ValueError"),
    Case("sglang.dcp.comm_backend", "0.5.23", "--dcp-replicate-q-proj", refused="--dcp-replicate-q-proj requires "
         "--dcp-size > 1.", source=f"{PH}:267", exception="ValueError"),
    Case("sglang.dcp.comm_backend", "0.5.23", "--dcp-replicate-q-proj --dcp-size 2 --dcp-comm-backend ag_rs",
         refused="--dcp-replicate-q-proj only applies to the a2a/fi_a2a DCP communication backend",
         exception="ValueError"),
    Case("sglang.dcp.comm_backend", "0.5.23", "--dcp-replicate-q-proj --dcp-size 2"),     # unset: a2a / fi_a2a
]


def _id(c: Case) -> str:
    return f"{c.rule.removeprefix('sglang.')}-{c.version}-{c.words.replace(' ', '')[:48]}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    assert_verdict(judge(case.version, case.words, case.model, case.layout), case.rule, case.refused,
                   exception=case.exception, version=case.version, source=case.source)


def test_every_rule_of_the_module_has_a_refusing_and_an_accepted_case() -> None:
    refused = {c.rule for c in CASES if c.refused is not None}
    accepted = {c.rule for c in CASES if c.refused is None}
    assert refused == accepted == set(rules_parallel2.RULES)


def test_the_mla_prefill_cp_size_is_named_not_guessed() -> None:
    """DeepSeek's prefill CP sets attn_cp_size = tp // attn_dp itself (model_overrides/deepseek_v2.py): the line's
    --attn-cp-size 3 is not what SGLang checks, so nothing is refused and the checks are named as not judged."""
    judged = judge("0.5.23", "--enable-prefill-cp --cp-strategy zigzag --attn-cp-size 3", MLA)
    assert not [r for r in judged.refusals if r.rule in rules_parallel2.CP_SIZE_RULES]
    assert any("context-parallel size" in n for n in judged.not_judged)
    # without prefill CP the same model keeps the line's size, and 3 does not divide TP 8
    plain = judge("0.5.23", "--attn-cp-size 3", MLA)
    assert {"sglang.cp.tp_divisible_by_cp", "sglang.attn_cp.tp_divisible"} <= {r.rule for r in plain.refusals}


def test_dwdp_sets_the_moe_dp_size_itself() -> None:
    judged = judge("0.5.23", "--dwdp-size 8 --moe-dp-size 3", MOE)
    assert not [r for r in judged.refusals if r.rule in rules_parallel2.MOE_DP_RULES]
    assert any("--dwdp-size" in n for n in judged.not_judged)


def test_deterministic_inference_leaves_the_aiter_fusion_unjudged() -> None:
    judged = judge("0.5.23", "--attn-cp-size 2 --enable-aiter-allreduce-fusion --enable-deterministic-inference")
    assert not [r for r in judged.refusals if r.rule == "sglang.cp.aiter_allreduce_fusion"]
    assert any("sglang.cp.aiter_allreduce_fusion" in n for n in judged.not_judged)


def test_the_elastic_backend_none_is_not_guessed() -> None:
    judged = judge("0.5.23", "--elastic-ep-backend none", MOE, on(tp=4, pp=2))
    assert not [r for r in judged.refusals if r.rule.startswith("sglang.elastic_ep.")]
    assert any("elastic_ep_backend" in n for n in judged.not_judged)


def test_the_ep_size_of_the_older_spelling_is_read() -> None:
    """Up to 0.5.13 ``--ep-size`` parses into ``expert_parallel_size`` (ServerArgs.from_cli_args copies it): EPLB with
    --ep-size 8 is accepted there, as SGLang accepts it."""
    judged = judge("0.5.9", "--enable-eplb --ep-size 8", MOE)
    assert not [r for r in judged.refusals if r.rule == "sglang.eplb.needs_ep"]
    assert [r.rule for r in judge("0.5.9", "--enable-eplb", MOE).refusals] == ["sglang.eplb.needs_ep"]


@pytest.mark.parametrize("version", ["0.5.9", "0.5.12", "0.5.16", "0.5.19", "0.5.22", "0.5.23"])
def test_the_release_defaults_refuse_nothing_and_leave_nothing_unsaid(version: str) -> None:
    for model in (DENSE, MOE, MLA):
        judged = judge(version, "", model)
        assert (judged.refusals, judged.not_judged) == ((), ()), (model, judged)


def test_an_a2a_backend_sglang_rewrites_is_not_guessed() -> None:
    """--enable-waterfill turns every backend but deepep / megamoe into deepep (overrides.py _a2a_backend_overrides):
    the pplx line's checks read a backend SGLang rewrote, so they are named, not judged."""
    judged = judge("0.5.23", "--moe-a2a-backend pplx --enable-waterfill", MOE)
    assert not [r for r in judged.refusals if r.rule.startswith("sglang.a2a.")]
    assert any("(sglang.a2a.pplx): reads a2a_backend" in n for n in judged.not_judged)


def test_gpulayout_check_fails_kv_cache_sharding_outside_pd_prefill(capsys: pytest.CaptureFixture[str]) -> None:
    """Through the front door, in the release's words; the accepted neighbour (a PD prefill worker) passes."""
    from pytest_gpulayout.cli import main

    def check(extra: str) -> dict[str, object]:
        cmd = f"python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 8 --enable-kv-cache-sharding {extra}"
        main(["check", "--cmd", cmd, "--machine", "preset:8xH100-sxm", "--json"])
        data = json.loads(capsys.readouterr().out)
        (dep,) = data["deployments"].values()
        return dict(dep["checks"]["config"])
    refused = check("")
    assert refused["status"] == "fail"
    assert "only supported on PD prefill workers" in str(refused["message"])
    # a GQA model shards across prefill CP ranks (0.5.23 kv_shard_hook.py l.265-270, sglang.kv_cache_sharding.flags)
    assert check("--disaggregation-mode prefill --enable-prefill-cp --attn-cp-size 2 --cp-strategy interleave")[
        "status"] == "pass"
