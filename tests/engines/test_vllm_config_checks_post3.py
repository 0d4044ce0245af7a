"""vLLM's config-time refusals of ``engines/vllm/rules_post3.py``: ReplaySSM / RecoverSSM, adaptive verification
against the CUDA-graph mode, sampling / trace replay and prefill context parallel on Model Runner V1, dual-chunk
attention's backend, and the V0 engine chosen by hand. Each command line is read by the release's own parser and
judged in the release's words at its line; each refusal has its accepted neighbour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import EnvCase, LineCase, case_id, judge, layout
from vllm_line_cases import model_of as line_model_of

from pytest_gpulayout.engines.vllm import rules_post3
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec

MODELS = Path(__file__).parent.parent / "data" / "models"
NEMOTRON_H = "nemotron-h-8b"            # NemotronHForCausalLM: SupportsReplaySSM, IsHybrid
LONG = "qwen2.5-7b-instruct-1m"         # dual_chunk_attention_config
SLIDING = "mistral-sw"                  # every layer slides (sliding_window 4096)
M8 = "Qwen/Qwen3-8B"                    # 0.8.x take the model positional


def model_of(name: str) -> ModelSpec:
    """The cases' models: the shared ones, or a local config of tests/data/models."""
    if name in (NEMOTRON_H, LONG, SLIDING):
        return load_model(str(MODELS / name))
    return line_model_of(name)


def spec(**keys: object) -> str:
    return f"--speculative-config {json.dumps(keys, separators=(',', ':'))}"


Case = LineCase
SSM = rules_post3.REPLAYSSM
ADAPTIVE = rules_post3.ADAPTIVE_GRAPHS
SAMPLING = rules_post3.SAMPLING_REPLAY
TRACE = rules_post3.TRACE_REPLAY
PCP = rules_post3.PCP_RUNNER
DUAL = rules_post3.DUAL_CHUNK
SW = rules_post3.V0_SLIDING
FAST = rules_post3.V0_FAST_PREFILL
NIXL = '--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}'
ADAPT = spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4, enable_adaptive_verification=True)

CASES = [
    # config/vllm.py:2344-2348 (0.27.0), 2856-2860 (0.29.0), 3475-3479 (0.33.0): the class lacks SupportsReplaySSM
    Case(SSM, "0.27.0", "--use-replayssm", layout(), refused="--use-replayssm is only supported for Nemotron-H models "
         "(got architecture 'Qwen3ForCausalLM')", source="vllm/config/vllm.py:2345"),
    Case(SSM, "0.33.0", "--use-replayssm", layout(),
         refused="--use-replayssm is not supported for architecture 'Qwen3ForCausalLM'",
         source="vllm/config/vllm.py:3476"),
    Case(SSM, "0.32.0", "--use-replayssm", layout(),
         refused="--use-replayssm is not supported for architecture 'Qwen3ForCausalLM'",
         source="vllm/config/vllm.py:3340"),
    Case(SSM, "0.33.0", "--use-replayssm --no-enable-prefix-caching", layout(), model=NEMOTRON_H),
    Case(SSM, "0.33.0", "--no-enable-prefix-caching", layout()),
    # the backend: triton only (0.27-0.29, :2356-2357 in 0.27.0); triton or flashinfer (0.30+, :3532-3535 in 0.33.0)
    Case(SSM, "0.27.0", "--use-replayssm --mamba-backend flashinfer --no-enable-prefix-caching", layout(),
         model=NEMOTRON_H, refused="--use-replayssm requires --mamba-backend triton",
         source="vllm/config/vllm.py:2357"),
    Case(SSM, "0.29.0", "--use-replayssm --mamba-backend flashinfer --no-enable-prefix-caching", layout(),
         model=NEMOTRON_H, refused="--use-replayssm requires --mamba-backend triton",
         source="vllm/config/vllm.py:2894"),
    Case(SSM, "0.33.0", "--use-replayssm --mamba-backend flashinfer --no-enable-prefix-caching", layout(),
         model=NEMOTRON_H),
    # FlashInfer ReplaySSM in align mode (prefix caching on a hybrid model): 0.30-0.32 in these words, 0.33 in others
    Case(SSM, "0.30.0", "--use-replayssm --mamba-backend flashinfer --enable-prefix-caching", layout(),
         model=NEMOTRON_H, refused="FlashInfer ReplaySSM does not support --mamba-cache-mode align yet; use none",
         source="vllm/config/vllm.py:3258"),
    Case(SSM, "0.33.0", "--use-replayssm --mamba-backend flashinfer --enable-prefix-caching", layout(),
         model=NEMOTRON_H, refused="FlashInfer ReplaySSM does not support prefix caching yet; use "
         "--disable-prefix-caching", source="vllm/config/vllm.py:3528"),
    # the buffer above 16 with FlashInfer (0.32+, :3480-3486 in 0.33.0)
    Case(SSM, "0.33.0", "--use-replayssm --mamba-backend flashinfer --replayssm-buffer-len 32 "
         "--no-enable-prefix-caching", layout(), model=NEMOTRON_H,
         refused="FlashInfer ReplaySSM requires --replayssm-buffer-len <= 16", source="vllm/config/vllm.py:3484"),
    Case(SSM, "0.33.0", "--use-replayssm --mamba-backend flashinfer --replayssm-buffer-len 8 "
         "--no-enable-prefix-caching", layout(), model=NEMOTRON_H),
    Case(SSM, "0.30.0", "--use-replayssm --mamba-backend flashinfer --replayssm-buffer-len 32 "
         "--no-enable-prefix-caching", layout(), model=NEMOTRON_H),
    # RecoverSSM (speculative tokens) off Kimi-K3 KDA, 0.29-0.31 (:2866-2867 in 0.29.0); from 0.32 a KDA model's only
    Case(SSM, "0.29.0", "--use-replayssm --no-enable-prefix-caching " + spec(method="ngram", num_speculative_tokens=2,
         prompt_lookup_max=4), layout(), model=NEMOTRON_H,
         refused="RecoverSSM is only supported for Kimi-K3 KDA", source="vllm/config/vllm.py:2866"),
    # a KV connector instance (0.27+, :2899-2903 in 0.29.0, :3545-3553 in 0.33.0)
    Case(SSM, "0.29.0", f"--use-replayssm --no-enable-prefix-caching {NIXL}", layout(), model=NEMOTRON_H,
         refused="--use-replayssm is incompatible with KV connectors (P/D disaggregation, KV cache offload)",
         source="vllm/config/vllm.py:2899"),
    Case(SSM, "0.29.0", "--use-replayssm --no-enable-prefix-caching", layout(), model=NEMOTRON_H),
    # adaptive verification: CUDA graphs off (0.29, config/vllm.py:2658-2664), not full (0.30+, :3166 in 0.33.0), PP
    Case(ADAPTIVE, "0.29.0", f'{ADAPT} -cc {{"cudagraph_mode":"NONE"}}', layout(),
         refused="Adaptive verification is not currently compatible with enforce_eager/cudagraph_mode=none",
         source="vllm/config/vllm.py:2661"),
    Case(ADAPTIVE, "0.33.0", f"{ADAPT} --enforce-eager", layout(),
         refused="Adaptive verification requires full CUDA graphs.", source="vllm/config/vllm.py:3166"),
    Case(ADAPTIVE, "0.33.0", ADAPT, layout(pp=2),
         refused="Adaptive verification is not currently compatible with pipeline parallelism",
         source="vllm/config/vllm.py:3177"),
    Case(ADAPTIVE, "0.33.0", f'{ADAPT} -cc {{"cudagraph_mode":"FULL_AND_PIECEWISE"}}', layout(pp=2),
         refused="with pipeline parallelism", source="vllm/config/vllm.py:3177"),
    Case(ADAPTIVE, "0.33.0", "--enforce-eager", layout(pp=2)),
    # sampling replay: logprobs mode (0.28+, config/vllm.py:1328-1333 in 0.33.0), logits processors (:1324-1327)
    Case(SAMPLING, "0.33.0", "--return-sampling-mask", layout(),
         refused="sampling distribution replay requires logprobs_mode='processed_logprobs'",
         source="vllm/config/vllm.py:1329"),
    Case(SAMPLING, "0.28.0", "--return-sampling-mask --logprobs-mode processed_logprobs --logits-processors a.B",
         layout(), refused="sampling distribution replay does not support custom logits processors",
         source="vllm/config/vllm.py:1042"),
    Case(SAMPLING, "0.33.0", "--return-sampling-mask --logprobs-mode processed_logprobs", layout()),
    # dual-chunk attention's backend (0.10.2, config/__init__.py:1305-1307)
    Case(DUAL, "0.10.2", "", layout(), model=LONG,
         refused="please set VLLM_ATTENTION_BACKEND to DUAL_CHUNK_FLASH_ATTN", source="vllm/config/__init__.py:1307"),
    Case(DUAL, "0.10.2", "", layout()),
    Case(DUAL, "0.11.0", "", layout(), model=LONG),
]




V1_RUNNER = (("VLLM_USE_V2_MODEL_RUNNER", "0"),)
V2_RUNNER = (("VLLM_USE_V2_MODEL_RUNNER", "1"),)
V0 = (("VLLM_USE_V1", "0"),)
REPLAY_OK = "--return-sampling-mask --logprobs-mode processed_logprobs"

ENV_CASES = [
    # Triton ReplaySSM on Model Runner V2 (0.30+, config/vllm.py:3536-3540 in 0.33.0, 3400-3404 in 0.32.0)
    EnvCase(Case(SSM, "0.33.0", "--use-replayssm --no-enable-prefix-caching", layout(), model=NEMOTRON_H,
                 refused="Triton ReplaySSM requires Model Runner V1", source="vllm/config/vllm.py:3537"), V2_RUNNER),
    EnvCase(Case(SSM, "0.33.0", "--use-replayssm --no-enable-prefix-caching", layout(), model=NEMOTRON_H),
            V1_RUNNER),
    EnvCase(Case(SSM, "0.33.0", "--use-replayssm --mamba-backend flashinfer --no-enable-prefix-caching", layout(),
                 model=NEMOTRON_H), V2_RUNNER),
    # sampling / trace replay on Model Runner V1 (config/vllm.py:1308-1309 and 1339-1340 in 0.33.0)
    EnvCase(Case(SAMPLING, "0.33.0", REPLAY_OK, layout(), refused="sampling distribution replay requires Model "
                 "Runner V2", source="vllm/config/vllm.py:1309"), V1_RUNNER),
    EnvCase(Case(SAMPLING, "0.33.0", REPLAY_OK, layout()), V2_RUNNER),
    EnvCase(Case(TRACE, "0.33.0", "--enable-trace-replay", layout(), refused="trace replay requires Model Runner V2",
                 source="vllm/config/vllm.py:1340"), V1_RUNNER),
    EnvCase(Case(TRACE, "0.29.0", "--enable-trace-replay", layout(), refused="trace replay requires Model Runner V2",
                 source="vllm/config/vllm.py:1073"), V1_RUNNER),
    EnvCase(Case(TRACE, "0.33.0", "--enable-trace-replay", layout()), V2_RUNNER),
    EnvCase(Case(TRACE, "0.33.0", REPLAY_OK, layout()), V1_RUNNER),
    # PCP on Model Runner V1 (0.27-0.28, config/vllm.py:1490-1496 in 0.27.0); unset, PCP > 1 picks V2
    EnvCase(Case(PCP, "0.27.0", "-pcp 2", layout(tp=2), refused="Prefill context parallelism requires Model Runner "
                 "V2. Remove VLLM_USE_V2_MODEL_RUNNER=0.", source="vllm/config/vllm.py:1493"), V1_RUNNER),
    EnvCase(Case(PCP, "0.28.0", "-pcp 2", layout(tp=2), refused="Prefill context parallelism requires Model Runner "
                 "V2.", source="vllm/config/vllm.py:1604"), V1_RUNNER),
    EnvCase(Case(PCP, "0.27.0", "-pcp 2", layout(tp=2)), ()),
    EnvCase(Case(PCP, "0.29.0", "-pcp 2", layout(tp=2)), V1_RUNNER),
    # dual-chunk attention with its backend (0.10.2): accepted by this check (--enforce-eager for rules_post's)
    EnvCase(Case(DUAL, "0.10.2", "--enforce-eager", layout(), model=LONG),
            (("VLLM_ATTENTION_BACKEND", "DUAL_CHUNK_FLASH_ATTN"),)),
    # the V0 engine: prefix caching with a sliding window (config.py:1516 in 0.9.0, config/cache.py:193 in 0.11.0)
    EnvCase(Case(SW, "0.9.0", "--enable-prefix-caching", layout(), model=SLIDING, exception="NotImplementedError",
                 refused="Prefix caching is not supported with sliding window. Run with --disable-sliding-window to "
                 "use prefix caching.", source="vllm/config.py:1516"), V0),
    EnvCase(Case(SW, "0.11.0", "--enable-prefix-caching", layout(), model=SLIDING, exception="NotImplementedError",
                 refused="Prefix caching is not supported with sliding window.",
                 source="vllm/config/cache.py:193"), V0),
    EnvCase(Case(SW, "0.11.0", "--enable-prefix-caching --disable-sliding-window", layout(), model=SLIDING), V0),
    EnvCase(Case(SW, "0.11.0", "--enable-prefix-caching", layout(), model=SLIDING), (("VLLM_USE_V1", "1"),)),
    EnvCase(Case(SW, "0.11.0", "--enable-prefix-caching", layout()), V0),
    # below SM 8.0 0.9.0 falls back to V0 by itself
    EnvCase(Case(SW, "0.9.0", "--enable-prefix-caching", layout(cc=(7, 5)), model=SLIDING,
                 exception="NotImplementedError", refused="Prefix caching is not supported with sliding window.",
                 source="vllm/config.py:1516"), ()),
    # KV-sharing fast prefill on V0 (0.10.2, config/__init__.py:3417-3421)
    EnvCase(Case(FAST, "0.10.2", "--kv-sharing-fast-prefill", layout(), exception="NotImplementedError",
                 refused="Fast prefill optimization for KV sharing is not supported in V0 currently.",
                 source="vllm/config/__init__.py:3419"), V0),
    EnvCase(Case(FAST, "0.10.2", "--kv-sharing-fast-prefill", layout()), (("VLLM_USE_V1", "1"),)),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case, model_of)


@pytest.mark.parametrize("env_case", ENV_CASES, ids=lambda c: case_id(c.case))
def test_line_with_env(env_case: EnvCase) -> None:
    judge(env_case.case, model_of, env_case.env)


def test_what_the_release_resolves_is_named_not_guessed() -> None:
    """Where the release's own choice decides (the model runner, a hybrid model's default prefix caching, the
    CUDA-graph mode, the V0 / V1 oracle), the entry is named as not judged and nothing is refused."""
    for version, line, model, rule in (
            ("0.33.0", "--use-replayssm", NEMOTRON_H, SSM),
            ("0.30.0", "--use-replayssm", NEMOTRON_H, SSM),
            ("0.33.0", ADAPT, "dense", ADAPTIVE),
            ("0.33.0", REPLAY_OK, "dense", SAMPLING),
            ("0.11.0", "--enable-prefix-caching", SLIDING, SW)):
        judged = config_check(resolve(line.split(), Version(version)), model_of(model), layout(), Version(version))
        assert not [r for r in judged.refusals if r.rule == rule], judged.refusals
        assert any(f"({rule})" in n for n in judged.not_judged), judged.not_judged


def test_replayssm_reads_only_its_own_flags() -> None:
    """Without --use-replayssm the function returns first: a FlashInfer backend with a long buffer, a KV connector
    and speculative tokens on a Nemotron-H model refuse nothing here, and nothing is named."""
    line = f"--mamba-backend flashinfer --replayssm-buffer-len 32 {NIXL} " + spec(
        method="ngram", num_speculative_tokens=2, prompt_lookup_max=4)
    version = Version("0.33.0")
    judged = config_check(resolve(line.split(), version), model_of(NEMOTRON_H), layout(), version)
    assert not [r for r in judged.refusals if r.rule == SSM]
    assert not [n for n in judged.not_judged if f"({SSM})" in n]
