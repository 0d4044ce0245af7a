"""SGLang's config-time refusals about speculative decoding, LoRA adapters and the metrics bucket rules: the
values their entries read, as each release holds them where it checks (``config_checks.namespace`` adds
``values``; ``judge_frames`` judges the entries that need a frame of their own).

Speculative decoding (``--speculative-algorithm``): the release first rewrites the algorithm: ``NEXTN`` is
``EAGLE`` in every release (0.4.6 ``server_args.py`` L317, 0.5.8 L2124, 0.5.23
``arg_groups/speculative_hook.py`` L109), and from 0.5.12, whose parser lists no choices, the word is upper-cased
first (0.5.12.post1 ``server_args.py`` L3562, 0.5.23 ``speculative_hook.py`` handle_speculative_decoding). From
0.5.12 ``EAGLE`` / ``NEXTN`` with a Gemma 4 assistant draft becomes ``FROZEN_KV_MTP`` (the draft's config decides,
``_resolve_speculative_algorithm_alias``): with ``--speculative-draft-model-path`` given, the EAGLE family's own
checks are then not judged (said). From 0.5.13 each algorithm's checks sit in a handler of its own
(``_handle_eagle_family``, ``_handle_ngram``, ``_handle_dflash``, from 0.5.16 ``_handle_dspark``, from 0.5.20
``_handle_uno``) whose conditions do
not repeat the algorithm: ``SPEC_RULES`` says which algorithm each rule is about, and a rule is judged only for
its algorithm.

What speculative decoding changes instead of refusing (not refusals, so not judged here): EAGLE / EAGLE3 /
STANDALONE set ``max_running_requests`` to 48 when it is not given, turn the overlap schedule off (unless
``SGLANG_ENABLE_SPEC_V2``) and mixed chunked prefill off, fill ``speculative_num_steps`` / ``-eagle-topk`` /
``-num-draft-tokens`` from ``auto_choose_speculative_params`` by model architecture and set
``speculative_num_draft_tokens = speculative_num_steps + 1`` when the top-k is 1 (0.5.8 ``server_args.py``
L2131-2225); NGRAM likewise sets 48 requests, turns the overlap schedule and mixed chunk off and takes its top-k
from ``--speculative-ngram-max-bfs-breadth`` (L2227-2243). The checks that read the top-k or page size after
those rewrites (``trtllm_mha`` with top-k > 1, top-k > 1 with page size > 1) stay open.

LoRA (``check_lora_server_args``, from 0.5.19 ``arg_groups/lora_hook.py``): ``--enable-lora`` is a
``store_true`` whose default is None, and ``--lora-paths`` given sets it (0.5.8 ``server_args.py`` L4987-4996);
``--enable-lora-overlap-loading`` unset is False there (L4999). The adapters are parsed before the counts are
read: a list of one entry per word from 0.5.1, before that a dict by adapter name (0.4.10.post2 L1978-1990, so
two words of one name are one adapter); none given is an empty list. ``--lora-target-modules`` is made a set
before the ``all`` check (``--lora-target-modules all all`` passes). Before 0.5.1 the release asserted
``lora_paths is None or disable_radix_cache`` (0.4.6 - 0.4.10.post2): judged in a frame of its own over the
adapters as given, with ``disable_radix_cache`` as ``__post_init__`` leaves it (``--disaggregation-mode decode``
sets it, 0.4.9 L538) and, in 0.4.6 / 0.4.6.post1, ``disable_cuda_graph`` (``--attention-backend torch_native``
L283 and ``--disaggregation-mode prefill`` L376 set it).

PD disaggregation (``--disaggregation-mode prefill / decode``; ``__post_init__`` to 0.5.2, ``_handle_disaggregation``
0.5.3 - 0.5.6.post2, ``_handle_pd_disaggregation`` to 0.5.12.post1, then ``arg_groups/pd_disaggregation_hook.py``):
judged in a frame of their own, because from 0.5.11 the hook runs before speculative decoding is resolved
(0.5.11 ``server_args.py`` L798 before L882; 0.5.21 ``arg_groups/pipeline.py`` L130 before L288), so it reads
``--speculative-algorithm`` as given (0.5.21's ``not in (None, 'DSPARK')`` refuses ``dspark``). A prefill server
checks its TP against the decode TP (``validate_disagg_tp_size``, 0.4.7.post1 - 0.5.9), the decode TP defaulting
to its own (0.4.9 ``server_args.py`` L541-547). From 0.5.20 ``--disaggregation-transfer-backend mooncake_tcp`` is
rewritten to ``mooncake`` before any backend check (0.5.23 ``pd_disaggregation_hook.py`` L29-44). What the mode
changes instead of refusing: decode turns the radix cache off unless ``--disaggregation-decode-enable-radix-cache``
(0.5.23 L93-106; 0.4.9 L538), prefill turned CUDA graphs off up to 0.4.10.post2 (0.4.9 L549).

Pipeline parallelism with speculative decoding (``check_server_args``): with ``--pp-size`` above 1 the release
turns the overlap schedule off first (0.4.9 ``server_args.py`` L429, 0.5.8 L2044 ``_handle_pipeline_parallelism``,
0.5.19 ``arg_groups/overrides.py`` L1617), then asserts no speculative algorithm (and, to 0.5.10.post1, no
``--enable-mixed-chunk``); from 0.5.21 ``check_pipeline_parallel_compat`` lets EAGLE through under conditions read
from the environment (``SGLANG_ENABLE_PP_SPEC``), which stay open, and asks DSPARK for a prefill server.

Metrics buckets (``validate_buckets_rule``, from 0.5.2, for ``--prompt-tokens-buckets`` and
``--generation-tokens-buckets``): each flag is judged in a frame of its own (the entries read ``arg_name`` and the
list); the ``try`` / ``except`` conversions are computed as Python computes them (``float`` / ``int`` of the
words), and where one fails the release stops at that assert, so the entries after it are not reached.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout, Refusal, RuleBook

#: the rules of this module, in words (``config_checks.RULES`` holds them)
RULES: Mapping[str, str] = {
    "sglang.spec.eagle_params": "EAGLE / EAGLE3 / NEXTN / STANDALONE with --speculative-eagle-topk or "
                                "--speculative-num-draft-tokens but no --speculative-num-steps",
    "sglang.spec.standalone": "STANDALONE speculative decoding with attention DP",
    "sglang.spec.ngram": "NGRAM speculative decoding with attention DP, or an external corpus whose SAM budget is "
                         "not positive or above the draft tokens less one, or whose max tokens are not positive",
    "sglang.spec.flags": "a draft window size not positive, a draft sink size negative or without a window, "
                         "--speculative-skip-dp-mlp-sync other than with EAGLE, or block verification with an "
                         "algorithm it does not list",
    "sglang.spec.dflash": "DFLASH with attention DP (from 0.5.23: without --enable-dp-lm-head, or with CP), with "
                          "PP, without --speculative-draft-model-path, or a --speculative-dflash-block-size that "
                          "is not positive or differs from --speculative-num-draft-tokens",
    "sglang.spec.uno": "UNO with TP or PP, attention DP or CP, a draft model path, LoRA, or no --uno-lora-path",
    "sglang.spec.uno_shape": "UNO's widths (--speculative-num-draft-tokens Q, --speculative-eagle-topk K, "
                             "--speculative-num-steps) out of what its linear or tree mode builds, or UNO with "
                             "deterministic inference, strict thinking, rejection sampling, or in tree mode PDMux, "
                             "two-batch overlap or accept thresholds other than 1.0",
    "sglang.lora.args": "LoRA adapter counts and modules: --max-loras-per-batch below 1, 'all' beside other "
                        "--lora-target-modules, no --lora-paths without --max-lora-rank and --lora-target-modules, "
                        "--max-loaded-loras below --max-loras-per-batch or the adapters, overlap loading without "
                        "a --max-loaded-loras within twice the batch, a negative --lora-drain-wait-threshold, "
                        "virtual experts without the triton backend (0.5.11)",
    "sglang.lora.speculative": "LoRA with speculative decoding other than NGRAM (0.5.5.post3 - 0.5.18), or than "
                               "NGRAM / EAGLE / EAGLE3 / DFLASH / DSPARK (0.5.19+)",
    "sglang.spec.attention_backend": "speculative decoding with --attention-backend trtllm_mla (0.4.10.post1 / "
                                     "post2), or DeepSeek-V3 / GLM-4 MoE MTP with flashinfer and a page size other "
                                     "than 1 (0.5.1 / 0.5.1.post1)",
    "sglang.spec.moe_runner": "--speculative-moe-runner-backend flashinfer_trtllm (0.5.7 - 0.5.11)",
    "sglang.lora.moe_runner": "a LoRA MoE runner (--moe-runner-backend lora_*) without LoRA, without --lora-backend "
                              "triton_v2, or with elastic EP or non-trivial expert placement (0.5.23)",
    "sglang.lora.draft_moe_runner": "a LoRA MoE runner as the draft's (--speculative-moe-runner-backend lora_*, "
                                    "0.5.23)",
    "sglang.lora.paths_json": "a --lora-paths JSON word without both 'lora_name' and 'lora_path' (0.5.1+)",
    "sglang.lora.radix_cache": "LoRA adapters with the radix cache on (before 0.5.1; 0.4.6 / 0.4.6.post1 also with "
                               "CUDA graphs)",
    "sglang.metrics.buckets": "a --prompt-tokens-buckets / --generation-tokens-buckets rule the release does not "
                              "take (type, parameter count, values)",
    "sglang.spec.rejection_sampling": "--speculative-use-rejection-sampling with STANDALONE, a top-k other than 1, "
                                      "accept thresholds other than 1.0 or deterministic inference (0.5.14+)",
    "sglang.spec.dspark": "DSPARK with pipeline parallelism (from 0.5.21: outside a PD prefill server), with "
                          "attention DP but no --enable-dp-lm-head or with CP, or a block size not positive",
    "sglang.spec.pipeline_parallel": "pipeline parallelism with speculative decoding (to 0.5.20; DSPARK outside a "
                                     "prefill server from 0.5.21) or, to 0.5.10.post1, with --enable-mixed-chunk",
    "sglang.pd.decode_flags": "--disaggregation-decode-tp / -dp on a decode server (0.4.7.post1 - 0.5.9)",
    "sglang.pd.tp_ratio": "a prefill server whose TP and --disaggregation-decode-tp are not multiples (to 0.5.9)",
    "sglang.pd.transfer_backend": "a --disaggregation-transfer-backend the mode does not take (fake on a prefill "
                                  "server; the decode radix cache or decode DCP with a backend they do not list)",
    "sglang.pd.decode_radix_cache": "--disaggregation-decode-enable-radix-cache with HiSparse or speculative "
                                    "decoding; decode DCP with a radix or hierarchical cache",
    "sglang.pd.encoder": "encoder disaggregation flags that do not go together (--enable-prefix-mm-cache without "
                         "--encoder-only, --encoder-only with --language-only or a PD mode, --language-only without "
                         "--encoder-urls to 0.5.12) or a model type it does not list (0.5.7+)",
    "sglang.pd.host_receive": "--disaggregation-decode-host-receive-threshold out of [0, 1], or decode host "
                              "receive with HiSparse, role switching or cpu_tensor retraction (0.5.21+)",
}

#: from 0.5.12 the algorithm is upper-cased before it is read, and EAGLE / NEXTN may become FROZEN_KV_MTP
ALGORITHM_UPPER_SINCE = Version("0.5.12")
#: before 0.5.1 the adapters are a dict by name when the counts are read (0.4.10.post2 server_args.py L1978)
LORA_LIST_SINCE = Version("0.5.1")

#: the rules about one speculative algorithm (as the release resolves it): judged only for that algorithm
SPEC_RULES: Mapping[str, tuple[str, ...]] = {
    "sglang.spec.eagle_params": ("EAGLE", "EAGLE3", "STANDALONE"),
    "sglang.spec.standalone": ("STANDALONE",),
    "sglang.spec.ngram": ("NGRAM",),
    "sglang.spec.dflash": ("DFLASH",),
    "sglang.spec.uno": ("UNO",),
    "sglang.spec.dspark": ("DSPARK",),
}
#: from 0.5.19 LoRA's speculative check lists the algorithms it takes (``arg_groups/lora_hook.py``
#: ``check_lora_speculative_compatibility``, the same tuple 0.5.19 - 0.5.23); it runs inside ``if enable_lora``
LORA_SPEC_RULE = "sglang.lora.speculative"
LORA_SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH", "DSPARK")
LORA_SPEC_LISTS_SINCE = Version("0.5.19")
#: the rules judged in frames of their own (``judge_frames``), not over the shared namespace
BUCKETS_RULE = "sglang.metrics.buckets"
LORA_RADIX_RULE = "sglang.lora.radix_cache"
PD_RULES = ("sglang.pd.decode_flags", "sglang.pd.transfer_backend", "sglang.pd.decode_radix_cache",
            "sglang.pd.host_receive", "sglang.pd.encoder")
PD_TP_RULE = "sglang.pd.tp_ratio"
PP_SPEC_RULE = "sglang.spec.pipeline_parallel"
REJECTION_RULE = "sglang.spec.rejection_sampling"
SPEC_FLAGS_RULE = "sglang.spec.flags"
LORA_JSON_RULE = "sglang.lora.paths_json"
UNO_SHAPE_RULE = "sglang.spec.uno_shape"
SPEC_BACKEND_RULE = "sglang.spec.attention_backend"
LORA_MOE_RULE = "sglang.lora.moe_runner"
FRAMED = frozenset({BUCKETS_RULE, LORA_RADIX_RULE, PD_TP_RULE, PP_SPEC_RULE, REJECTION_RULE, SPEC_FLAGS_RULE,
                    LORA_JSON_RULE, UNO_SHAPE_RULE, SPEC_BACKEND_RULE, LORA_MOE_RULE, *PD_RULES})
#: NGRAM's draft-token count where the line gives none (0.5.11 server_args.py L3573, 0.5.23
#: speculative_hook.py L1318), set before its external-corpus checks read it
NGRAM_DRAFT_TOKENS = 12
#: the EAGLE family's handler (``_handle_eagle_family``) runs for these; a promoted EAGLE runs another one
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
#: what the PD checks read as the line gives them (none is rewritten before the hook reads it)
_PD_AS_GIVEN: Mapping[str, object] = {
    "disaggregation_decode_tp": None, "disaggregation_decode_dp": None,
    "disaggregation_decode_enable_radix_cache": False, "enable_hisparse": False, "enable_hierarchical_cache": False,
    "enable_pd_role_switch": False, "disaggregation_decode_retraction_backup": None,
    # encoder disaggregation (``_handle_encoder_disaggregation``, 0.5.7+; 0.5.23 pd_disaggregation_hook.py
    # L304-380): none rewritten before (``handle_language_model_only`` only reads them); the model type is the
    # model's first architecture, as the release reads ``hf_config.architectures[0]``
    "encoder_only": False, "language_only": False, "enable_prefix_mm_cache": False, "encoder_urls": [],
    "enable_adaptive_dispatch_to_encoder": False}
#: the flags ``validate_buckets_rule`` is called for (0.5.2 - 0.5.23), by destination
BUCKET_FLAGS: Mapping[str, str] = {"prompt_tokens_buckets": "--prompt-tokens-buckets",
                                   "generation_tokens_buckets": "--generation-tokens-buckets"}
#: IQuest Q1's MTP draft sets the step count before the EAGLE family's assert reads it (0.5.23
#: speculative_hook.py L1158 ``_handle_iquest_q1_mtp_draft``)
_SETS_OWN_STEPS = ("IQuestQ1ForCausalLM",)


def _given(args: ResolvedArgs, dest: str) -> object:
    return args.get(dest) if args.is_set(dest) else None


def algorithm(args: ResolvedArgs, listed: Version) -> str | None:
    """``--speculative-algorithm`` as the release reads it in its checks (see the module docstring)."""
    algo = args.get("speculative_algorithm")
    if not isinstance(algo, str):
        return None
    if listed >= ALGORITHM_UPPER_SINCE:
        algo = algo.upper()
    return "EAGLE" if algo == "NEXTN" else algo


def _lora_paths(args: ResolvedArgs, listed: Version) -> list[object]:
    """The adapters once the release has parsed them (one per word; before 0.5.1 one per name)."""
    given = args.get("lora_paths")
    words = list(given) if isinstance(given, (list, tuple)) else []
    if listed >= LORA_LIST_SINCE:
        return words
    names: dict[str, object] = {}
    for word in words:
        name = word.split("=", 1)[0] if isinstance(word, str) else str(word)
        names[name] = word
    return list(names.values())


def values(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
           listed: Version) -> dict[str, object]:
    """The speculative-decoding and LoRA values the rules' conditions read (``listed``: the ledger's release)."""
    del model, layout, version
    ns: dict[str, object] = {"speculative_algorithm": algorithm(args, listed)}
    for dest in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                 "speculative_draft_model_path", "speculative_dflash_block_size", "uno_lora_path",
                 "speculative_ngram_external_corpus_path", "speculative_dspark_block_size"):
        ns[dest] = _given(args, dest)
    if ns["speculative_algorithm"] == "NGRAM" and ns["speculative_num_draft_tokens"] is None:
        ns["speculative_num_draft_tokens"] = NGRAM_DRAFT_TOKENS
    for dest in ("speculative_ngram_external_sam_budget", "speculative_ngram_external_corpus_max_tokens"):
        if dest in args.values:
            ns[dest] = args.get(dest)
    if not args.is_set("speculative_adaptive"):
        ns["speculative_adaptive"] = False  # given, ``_maybe_disable_adaptive`` may turn it off: not judged
    paths = args.get("lora_paths")
    enable_lora: bool | None = bool(args.get("enable_lora")) if args.is_set("enable_lora") else None
    if enable_lora is None and paths:
        enable_lora = True
    ns["enable_lora"] = enable_lora
    ns["lora_paths"] = _lora_paths(args, listed) if enable_lora else paths
    ns["enable_lora_overlap_loading"] = bool(_given(args, "enable_lora_overlap_loading"))
    per_batch = args.get("max_loras_per_batch", 8)
    ns["max_loras_per_batch"] = per_batch
    if isinstance(per_batch, int):
        ns["max_loaded_loras_limit"] = per_batch * 2  # the overlap-loading limit (0.5.8 L5004)
    for dest in ("max_loaded_loras", "max_lora_rank"):
        ns[dest] = args.get(dest)
    modules = args.get("lora_target_modules")
    ns["lora_target_modules"] = set(modules) if isinstance(modules, (list, tuple, set)) and modules else modules
    threshold = args.get("lora_drain_wait_threshold")
    if threshold is not None:
        ns["lora_drain_wait_threshold"] = threshold
    for dest in ("lora_use_virtual_experts", "lora_backend"):
        if dest in args.values:
            ns[dest] = args.get(dest)
    # the speculative MoE runner, as given, is checked first (0.5.7 - 0.5.11 ``_handle_speculative_decoding``):
    # ``MoeRunnerBackend(x).is_flashinfer_trtllm()`` is ``x == "flashinfer_trtllm"`` (layers/moe/utils.py)
    runner = _given(args, "speculative_moe_runner_backend")
    ns["speculative_moe_runner_backend"] = runner
    ns["MoeRunnerBackend(self.speculative_moe_runner_backend).is_flashinfer_trtllm()"] = runner == "flashinfer_trtllm"
    ns["lora_spec_algorithms"] = LORA_SPEC_ALGORITHMS
    ns["promoted"] = ""  # the FROZEN_KV_MTP words: only for a promoted algorithm, which is not judged
    return ns


def judged_here(rule: str, values: Mapping[str, object], model: ModelSpec, listed: Version) -> bool:
    """Whether ``rule`` is judged over the shared namespace for this line: the framed rules are not, a rule
    about one speculative algorithm only for that algorithm (the EAGLE family's also not where the release
    may promote it to FROZEN_KV_MTP by the draft's config, or where the model sets its own steps)."""
    if rule in FRAMED:
        return False
    if rule == LORA_SPEC_RULE and listed >= LORA_SPEC_LISTS_SINCE:  # returns first for NGRAM / none
        return bool(values.get("enable_lora")) and values.get("speculative_algorithm") not in ("NGRAM", None) \
            and not _may_be_promoted_for_lora(values)
    if rule not in SPEC_RULES:
        return True
    algo = values.get("speculative_algorithm")
    if algo not in SPEC_RULES[rule]:
        return False
    if rule == "sglang.spec.eagle_params":
        arch = model.architectures[0] if model.architectures else ""
        return arch not in _SETS_OWN_STEPS and not _may_be_promoted(values, listed)
    return True


def _may_be_promoted(values: Mapping[str, object], listed: Version) -> bool:
    """Whether the EAGLE family's steps assert would refuse a line the release may first promote to
    FROZEN_KV_MTP (EAGLE with a draft model from 0.5.12): where it would not refuse, either way it passes."""
    return (values.get("speculative_algorithm") == "EAGLE" and listed >= ALGORITHM_UPPER_SINCE
            and bool(values.get("speculative_draft_model_path")) and values.get("speculative_num_steps") is None
            and (values.get("speculative_eagle_topk") is not None
                 or values.get("speculative_num_draft_tokens") is not None))


def _may_be_promoted_for_lora(values: Mapping[str, object]) -> bool:
    """LoRA takes EAGLE but not FROZEN_KV_MTP (0.5.19+): EAGLE with a draft model may be either."""
    return (bool(values.get("enable_lora")) and values.get("speculative_algorithm") == "EAGLE"
            and bool(values.get("speculative_draft_model_path")))


_PROMOTED = ("the release promotes EAGLE / NEXTN to FROZEN_KV_MTP for a Gemma 4 assistant draft, read from the "
             "draft's config, which is not read")


def promoted_note(values: Mapping[str, object], listed: Version) -> tuple[str, ...]:
    """What ``judged_here`` left out where the algorithm may be promoted, in words."""
    notes = []
    if _may_be_promoted(values, listed):
        notes.append(f"the EAGLE family's checks (sglang.spec.eagle_params): {_PROMOTED}")
    if listed >= LORA_SPEC_LISTS_SINCE and _may_be_promoted_for_lora(values):
        notes.append(f"LoRA's speculative check ({LORA_SPEC_RULE}): {_PROMOTED}")
    return tuple(notes)


def _bucket_frame(flag: str, words: Sequence[object]) -> dict[str, object]:
    """What ``validate_buckets_rule`` reads for one flag's words (0.5.8 server_args.py L5112-5159)."""
    rule = words[0]
    frame: dict[str, object] = {"arg_name": flag, "buckets_rule": list(words), "rule": rule,
                                "except (ValueError, IndexError)": False, "except ValueError": False}
    if rule == "tse":
        try:
            middle, base, count = float(str(words[1])), float(str(words[2])), int(str(words[3]))
        except (ValueError, IndexError):
            frame["except (ValueError, IndexError)"] = True  # ``assert False``: the checks after it not reached
        else:
            frame.update(middle=middle, base=base, count=count)
    elif rule in ("custom", "customer"):  # 0.5.2 spelled it customer
        try:
            bucket_values = [float(str(x)) for x in words[1:]]
        except ValueError:
            frame["except ValueError"] = True
        else:
            frame["bucket_values"] = bucket_values
            frame["set(bucket_values)"] = set(bucket_values)
            frame["all((val >= 0 for val in bucket_values))"] = all(val >= 0 for val in bucket_values)
    return frame


def _radix_frame(args: ResolvedArgs) -> dict[str, object]:
    """The values 0.4.6 - 0.4.10.post2's LoRA / radix-cache assert reads, as ``__post_init__`` leaves them."""
    mode = args.get("disaggregation_mode")
    disable_radix = bool(args.get("disable_radix_cache", False)) or mode == "decode"
    disable_graph = bool(args.get("disable_cuda_graph", False)) or mode == "prefill" or (
        args.is_set("attention_backend") and args.get("attention_backend") == "torch_native")
    return {"max_loras_per_batch": args.get("max_loras_per_batch", 8), "lora_paths": args.get("lora_paths"),
            "disable_radix_cache": disable_radix, "disable_cuda_graph": disable_graph}


def _pd_frame(args: ResolvedArgs, values: Mapping[str, object]) -> dict[str, object]:
    """The values the PD checks read: the shared ones, the algorithm as given, the PD flags, and for a prefill
    server ``validate_disagg_tp_size(tp_size, disaggregation_decode_tp)``'s locals."""
    frame = dict(values)
    frame["speculative_algorithm"] = args.get("speculative_algorithm")
    frame.update({dest: args.get(dest, default) for dest, default in _PD_AS_GIVEN.items()})
    backend = args.get("disaggregation_transfer_backend", "mooncake")
    frame["disaggregation_transfer_backend"] = "mooncake" if backend == "mooncake_tcp" else backend
    threshold = args.get("disaggregation_decode_host_receive_threshold")
    if threshold is not None:
        frame["disaggregation_decode_host_receive_threshold"] = threshold
    prefill_tp = values.get("tp_size")
    decode_tp = frame["disaggregation_decode_tp"] if frame["disaggregation_decode_tp"] is not None else prefill_tp
    if isinstance(prefill_tp, int) and isinstance(decode_tp, int):
        frame.update(prefill_tp=prefill_tp, decode_tp=decode_tp, larger_tp=max(prefill_tp, decode_tp),
                     smaller_tp=min(prefill_tp, decode_tp))
    return frame


def _flags_frame(args: ResolvedArgs, values: Mapping[str, object], listed: Version) -> dict[str, object]:
    """What the algorithm-wide speculative checks read (``handle_speculative_decoding``, 0.5.13+; before, the
    DFLASH branch of ``_handle_speculative_decoding``): the draft window / sink sizes as ``int`` of the line's
    (0.5.23 speculative_hook.py L188-219; 0.5.11 spells it ``--speculative-dflash-draft-window-size``),
    ``--speculative-skip-dp-mlp-sync`` and ``--speculative-use-block-verification`` (both read after the
    algorithm's rewrite: where EAGLE with a draft model may have become FROZEN_KV_MTP, the algorithm is left
    out, so those entries are not judged)."""
    frame = dict(values)
    for dest in ("speculative_draft_window_size", "speculative_dflash_draft_window_size",
                 "speculative_draft_sink_size"):
        frame[dest] = _given(args, dest)
    window = frame["speculative_draft_window_size"] if frame["speculative_draft_window_size"] is not None \
        else frame["speculative_dflash_draft_window_size"]
    if isinstance(window, (int, float, str)):
        frame["window_size"] = int(window)
    sink = frame["speculative_draft_sink_size"]
    if isinstance(sink, (int, float, str)):
        frame["sink_size"] = int(sink)
    skip, block = (bool(args.get(d, False)) for d in ("speculative_skip_dp_mlp_sync",
                                                       "speculative_use_block_verification"))
    frame.update(speculative_skip_dp_mlp_sync=skip, speculative_use_block_verification=block)
    if (skip or block) and values.get("speculative_algorithm") == "EAGLE" and listed >= ALGORITHM_UPPER_SINCE \
            and values.get("speculative_draft_model_path"):
        del frame["speculative_algorithm"]
    return frame


def _rejection_frame(args: ResolvedArgs, values: Mapping[str, object]) -> dict[str, object]:
    """What the EAGLE family's rejection-sampling checks read (0.5.14+; 0.5.23 ``speculative_hook.py``
    L1209-1248): the flag (set too by ``--speculative-use-block-verification`` for EAGLE / EAGLE3, 0.5.22+ L161),
    the accept thresholds and deterministic inference as given, and the top-k as it stands after the release's
    auto choice: the line's where it gives ``--speculative-num-steps``, else chosen by architecture
    (``auto_choose_speculative_params``), which is not resolved here, so left out (not judged). Multi-layer EAGLE,
    which model overrides turn on (MiMo-V2, GigaChat 3.5), is left out too."""
    frame = {k: v for k, v in values.items() if k != "speculative_eagle_topk"}
    if values.get("speculative_num_steps") is not None:
        frame["speculative_eagle_topk"] = values.get("speculative_eagle_topk")
    block = bool(args.get("speculative_use_block_verification", False))
    frame["speculative_use_rejection_sampling"] = bool(args.get("speculative_use_rejection_sampling", False)) or (
        block and values.get("speculative_algorithm") in ("EAGLE", "EAGLE3"))
    for dest, default in (("speculative_accept_threshold_single", 1.0), ("speculative_accept_threshold_acc", 1.0),
                          ("enable_deterministic_inference", False)):
        frame[dest] = args.get(dest, default)
    return frame


def _uno_frame(args: ResolvedArgs, values: Mapping[str, object]) -> dict[str, object]:
    """What UNO's width / tree checks read (0.5.20+; 0.5.23 ``speculative_hook.py`` L472-580), computed as the
    release computes them from ``--speculative-num-draft-tokens`` (Q), ``--speculative-eagle-topk`` (K, 1 when not
    given) and ``--speculative-num-steps`` (F = steps + 1): where a check stops the release, the values after it
    are left out, so the entries it does not reach are not judged (and no ``None`` is compared)."""
    frame = {k: v for k, v in values.items() if k != "speculative_num_steps"}
    for dest, default in (("enable_deterministic_inference", False), ("enable_strict_thinking", False),
                          ("speculative_use_rejection_sampling", False), ("enable_two_batch_overlap", False),
                          ("enable_pdmux", False), ("speculative_accept_threshold_single", 1.0),
                          ("speculative_accept_threshold_acc", 1.0)):
        frame[dest] = args.get(dest, default)
    q = values.get("speculative_num_draft_tokens")
    frame["verify_width"] = q
    if not isinstance(q, int) or q < 1:
        return frame
    topk = values.get("speculative_eagle_topk")
    k = 1 if topk is None else topk
    if not isinstance(k, int):
        return frame
    frame["candidate_top_k"] = k
    steps = values.get("speculative_num_steps")
    frame["cfg.speculative_num_steps"] = steps
    if k <= 1 or not isinstance(steps, int):
        return frame
    frame["speculative_num_steps"] = steps
    if steps < 1:
        return frame
    capacity, nodes = 1, 1
    for _ in range(steps):
        nodes *= k
        capacity += nodes
        if capacity >= q:
            break
    frame.update(draft_width=steps + 1, frontier_slots=q * k, tree_capacity=capacity,
                 parent_width=k * max(steps - 1, 0) + 1)
    return frame


def _lora_word_frames(args: ResolvedArgs) -> list[dict[str, object]]:
    """One frame per ``--lora-paths`` word that ``LoRAPathAction`` reads as JSON (0.5.1+: 0.5.23
    ``arg_groups/argparse_actions.py``): the word stripped, and the object ``json.loads`` makes of it. A word
    that is not valid JSON is a ``json.JSONDecodeError`` the ledger does not list: its object is left out (the
    entry is said to be not judged)."""
    given = args.get("lora_paths")
    words: list[object] = list(given) if isinstance(given, (list, tuple)) else []
    frames: list[dict[str, object]] = []
    for word in words:
        if not isinstance(word, str):
            continue
        stripped = word.strip()
        frame: dict[str, object] = {"values": words, "for lora_path in values": True, "lora_path": stripped,
                                    "repr(lora_path)": repr(stripped)}
        if stripped.startswith("{") and stripped.endswith("}"):
            try:
                frame["obj"] = json.loads(stripped)
            except ValueError:
                pass
        frames.append(frame)
    return frames


def judge(ask: Ask) -> Judged:
    """This module's rules in force for the line (``judged_here``) over the shared namespace, then its frames
    (``judge_frames``); what was left out, in words, with the entries not judged."""
    values, listed = ask.values, ask.listed
    shared = ask.judge({}, [r for r in ask.among(RULES) if judged_here(r, values, ask.model, listed)])
    framed = judge_frames(ask.book, ask.version, ask.args, values)
    return Judged(shared.refusals + framed.refusals,
                  promoted_note(values, listed) + shared.not_judged + framed.not_judged)


def judge_frames(book: RuleBook, version: Version, args: ResolvedArgs, values: Mapping[str, object]) -> Judged:
    """The framed rules: each bucket flag the line gives, the old LoRA / radix-cache assert, and the PD checks
    (the prefill server's TP ratio only where the mode is prefill)."""
    refusals: list[Refusal] = []
    not_judged: list[str] = []
    algo = values.get("speculative_algorithm")
    if algo == "UNO":
        judged = book.judge(version, _uno_frame(args, values), rules=[UNO_SHAPE_RULE])
        refusals.extend(judged.refusals)
        if not judged.refusals:  # a check that refuses stops the release: the entries after it are not reached
            not_judged.extend(judged.not_judged)
    if algo is not None:
        # ``--attention-backend trtllm_mla`` with speculative decoding (0.4.10.post2 server_args.py L428-442)
        # and DeepSeek-V3 / GLM-4 MoE MTP with flashinfer and a page size other than 1 (0.5.1 L641-644, after
        # ``page_size`` None became 1 at L521): the backend as the line gives it, else None, as it still is there
        # on CUDA (those releases pick a default only for the CPU / HPU devices, 0.4.10.post2 L384-390, and in
        # 0.5.1 ``model_specific_adjustments`` only for GPT-OSS, L2227-2234; the GPU default comes later, in the
        # model runner)
        page = args.get("page_size")
        backend = args.get("attention_backend") if args.is_set("attention_backend") else None
        frame = {**values, "page_size": 1 if page is None else page, "attention_backend": backend}
        judged = book.judge(version, frame, rules=[SPEC_BACKEND_RULE])
        refusals.extend(judged.refusals)
        not_judged.extend(judged.not_judged)
    backend = args.get("moe_runner_backend")
    if isinstance(backend, str) and backend.startswith("lora"):
        # ``check_lora_moe_runner_args`` returns first for any other runner (0.5.23 lora_hook.py L195-196), which
        # the entries' conditions do not say: judged only for a LoRA MoE runner, over the flags as given
        frame = {**values, "backend": backend, "moe_runner_backend": backend,
                 "lora_backend": args.get("lora_backend", "csgmv"),
                 "enable_eplb": bool(args.get("enable_eplb", False)),
                 "init_expert_location": args.get("init_expert_location", "trivial"),
                 "ep_num_redundant_experts": args.get("ep_num_redundant_experts", 0)}
        judged = book.judge(version, frame, rules=[LORA_MOE_RULE])
        refusals.extend(judged.refusals)
        not_judged.extend(judged.not_judged)
    for frame in _lora_word_frames(args):
        judged = book.judge(version, frame, rules=[LORA_JSON_RULE])
        refusals.extend(judged.refusals)
        not_judged.extend(judged.not_judged)
    listed = book.ledger.listed(version) or version
    judged = book.judge(version, _flags_frame(args, values, listed), rules=[SPEC_FLAGS_RULE])
    refusals.extend(judged.refusals)
    not_judged.extend(judged.not_judged)
    if algo in EAGLE_FAMILY and not (algo == "EAGLE" and listed >= ALGORITHM_UPPER_SINCE
                                     and values.get("speculative_draft_model_path")):
        judged = book.judge(version, _rejection_frame(args, values), rules=[REJECTION_RULE])
        refusals.extend(judged.refusals)
        not_judged.extend(judged.not_judged)
    if values.get("pp_size", 1) != 1:  # ``if pp_size > 1``: the PP handler has turned the overlap schedule off
        frame = {**values, "disable_overlap_schedule": True,
                 "enable_mixed_chunk": bool(args.get("enable_mixed_chunk", False))}
        judged = book.judge(version, frame, rules=[PP_SPEC_RULE])
        refusals.extend(judged.refusals)
        not_judged.extend(judged.not_judged)
    pd_rules = [*PD_RULES, PD_TP_RULE] if args.get("disaggregation_mode") == "prefill" else list(PD_RULES)
    judged = book.judge(version, _pd_frame(args, values), rules=pd_rules)
    refusals.extend(judged.refusals)
    not_judged.extend(judged.not_judged)
    for dest, flag in BUCKET_FLAGS.items():
        words = args.get(dest)
        if not isinstance(words, (list, tuple)) or not words:
            continue  # ``if not buckets_rule: return``
        frame = _bucket_frame(flag, words)
        judged = book.judge(version, frame, rules=[BUCKETS_RULE])
        refusals.extend(judged.refusals)
        if not judged.refusals:  # a failed conversion stops there: the entries after it are not reached
            not_judged.extend(judged.not_judged)
    judged = book.judge(version, _radix_frame(args), rules=[LORA_RADIX_RULE])
    refusals.extend(judged.refusals)
    not_judged.extend(judged.not_judged)
    return Judged(tuple(refusals), tuple(not_judged))
