"""SGLang's parallel setup beyond TP / PP / DP: context parallelism, MoE data parallelism, KV cache sharding, DWDP,
decode context parallelism's communication flags, the MoE all-to-all backends and elastic EP, the values their
refusals read as each release resolves them (``config_checks.py`` judges them; ``in_force`` says which it does not).

* Context parallelism (``ServerArgs._handle_context_parallelism``, 0.5.9 - 0.5.18 ``server_args.py``; from 0.5.19
  ``arg_groups/parallel_hook.py handle_context_parallelism``): with ``--attn-cp-size`` > 1 it asserts
  ``tp_size % attn_cp_size == 0`` (0.5.23 l.159-161), refuses ``--enable-aiter-allreduce-fusion`` (l.166-168) and,
  in 0.5.9 only, PP (0.5.9 ``server_args.py`` l.2092); with ``--moe-dp-size`` > 1 it asserts ``tp_size %
  moe_dp_size == 0``, ``ep_size x moe_dp_size <= tp_size``, ``pp_size == 1``, ``ep_size x moe_dp_size == tp_size``
  where EP is on, and no aiter fusion (0.5.23 l.171-186; 0.5.9 PP at l.2102); and ``attn_cp_size != moe_dp_size``
  only with ``moe_dp_size == 1`` (0.5.11+, 0.5.23 l.189-191). From 0.5.14 ``--enable-prefill-cp`` needs
  ``--cp-strategy`` (0.5.14 ``server_args.py`` l.4986-4989, 0.5.23 l.151-153).

  The sizes are the line's, with two exceptions SGLang makes before the check, where they are not judged (and
  named): an MLA model with prefill context parallelism (``--enable-prefill-cp``, or the older
  ``--enable-prefill-context-parallel`` / ``--enable-nsa-prefill-context-parallel``), whose attention CP size the
  DeepSeek branch sets itself (0.5.14 ``server_args.py`` l.3670 ``attn_cp_size = tp_size // dp_size``, 0.5.23
  ``arg_groups/model_overrides/deepseek_v2.py`` l.128-134 and l.202-210, also ``ep_size = tp_size``), and
  DeepSeek V4 (``arg_groups/deepseek_v4_hook.py``); and ``--dwdp-size`` > 1, which sets ``moe_dp_size = 1``
  (0.5.18 ``server_args.py`` l.6638, 0.5.23 ``parallel_hook.py`` l.493). The legacy prefill-CP flags pick a
  ``--cp-strategy`` from their mode (0.5.14 ``_handle_legacy_cp_arguments`` l.4948-4951): with them the strategy is
  not judged. ``--enable-deterministic-inference`` turns the aiter fusion off first (0.5.14 l.5968-5973, 0.5.23
  ``attention_hook.py`` l.599-608): with it the fusion is not judged.
* KV cache sharding (0.5.22+, ``arg_groups/kv_shard_hook.py handle_kv_cache_sharding``): returns at once without
  ``--enable-kv-cache-sharding`` (0.5.23 l.90-91), so its refusals are judged only with it; the first is a
  ``--disaggregation-mode`` other than ``prefill`` (l.100-104: "only supported on PD prefill workers").
* DWDP (``--dwdp-size`` > 1, 0.5.17+: ``ServerArgs._handle_dwdp``, from 0.5.19 ``parallel_hook.py handle_dwdp``,
  0.5.23 l.433-457): the size must be TP, with ``--disaggregation-mode`` null or prefill, no EPLB, PP 1 and no
  two-batch overlap; it returns at once without it, so these are judged only with it.
* Decode context parallelism (0.5.20+, ``parallel_hook.py handle_decode_context_parallelism``): ``--dcp-comm-backend
  a2a`` / ``fi_a2a`` and ``--dcp-replicate-q-proj`` need ``--dcp-size`` > 1, and the latter an a2a backend
  (0.5.23 l.251-272).
* MoE all-to-all (``handle_a2a_moe``, ``ServerArgs._handle_a2a_moe`` up to 0.5.18): ``--flashinfer-a2a-dispatch-type``
  needs ``--moe-a2a-backend flashinfer`` (0.5.20+, 0.5.23 ``arg_groups/moe_hook.py`` l.307-313); pplx refuses
  ``--deepep-mode normal`` and needs two attention-DP groups (0.5.17+, 0.5.23 l.575-594); FlashInfer MegaMOE (and in
  0.5.22 FlashInfer A2A) needs ``--attn-dp-size`` equal to TP (0.5.23 l.325-327). The backend is the line's except
  where SGLang rewrites it first (``_a2a_backend``).
* Elastic EP (``ServerArgs._handle_elastic_ep`` 0.5.4 - 0.5.18, ``parallel_hook.py handle_elastic_ep`` from 0.5.19):
  an ``--elastic-ep-backend`` (``none``, a choice of the parser while the field's type is ``Literal[None, ...]``,
  0.5.23 ``arg_groups/fields/exec_.py`` l.951-957, is not judged) with ``--enable-eplb`` needs an elasticity-aware
  ``--eplb-algorithm`` (``auto`` becomes ``elasticity_aware`` first) and, from 0.5.11, PP 1; ``--elastic-ep-rejoin``
  needs a backend (0.5.11 - 0.5.15), and from 0.5.16 becomes ``--elastic-ep-join-mode recover`` (conflicting with
  another join mode) before ``--elastic-ep-join-mode`` is checked to need a backend, ``scale`` to need
  ``--node-rank 1`` and a positive ``--elastic-ep-join-rank-offset``, an offset to need ``scale`` and be >= 0,
  ``--max-ep-size`` to need a backend and be positive, and ``--elastic-ep-initial-size`` to need scaling
  (``max_ep_size > tp_size`` with a backend: 0.5.16 l.5982-5986, 0.5.23 l.572-576).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

#: the rules of this module (``config_checks.RULES``, block ``# -- parallel2``)
RULES: Mapping[str, str] = {
    "sglang.cp.tp_divisible_by_cp": "--attn-cp-size that does not divide --tp-size",
    "sglang.cp.pipeline": "pipeline parallelism with --moe-dp-size > 1 (0.5.9: also with --attn-cp-size > 1)",
    "sglang.moe_dp.layout": "--moe-dp-size that does not divide TP, or whose product with EP is not TP, or beside a "
                            "different --attn-cp-size",
    "sglang.cp.aiter_allreduce_fusion": "--enable-aiter-allreduce-fusion with context parallelism "
                                        "(--attn-cp-size or --moe-dp-size > 1)",
    "sglang.prefill_cp.strategy": "--enable-prefill-cp without --cp-strategy (0.5.14+)",
    "sglang.kv_cache_sharding.pd_prefill": "--enable-kv-cache-sharding outside a PD prefill worker (0.5.22+)",
    "sglang.elastic_ep.backend": "--elastic-ep-rejoin, --elastic-ep-join-mode or --max-ep-size without "
                                 "--elastic-ep-backend, or a join mode the deprecated --elastic-ep-rejoin contradicts",
    "sglang.elastic_ep.sizes": "a --max-ep-size below 1, an --elastic-ep-join-rank-offset or --node-rank that does not "
                               "fit the join mode, or an --elastic-ep-initial-size without scaling",
    "sglang.elastic_ep.eplb_pp": "elastic EP with a non-elastic --eplb-algorithm, or with PP (0.5.11+)",
    "sglang.a2a.flashinfer_dispatch_type": "--flashinfer-a2a-dispatch-type without --moe-a2a-backend flashinfer "
                                           "(0.5.20+)",
    "sglang.a2a.pplx": "--moe-a2a-backend pplx with --deepep-mode normal, or without two attention-DP groups",
    "sglang.a2a.attn_dp_width": "--moe-a2a-backend flashinfer / flashinfer_megamoe with an attention-DP size other "
                                "than TP (0.5.22+)",
    "sglang.dwdp.layout": "--dwdp-size other than TP, or beside PP, EPLB, two-batch overlap or a PD decode worker "
                          "(0.5.17+)",
    "sglang.dcp.comm_backend": "--dcp-comm-backend a2a / fi_a2a or --dcp-replicate-q-proj without --dcp-size > 1, or "
                               "--dcp-replicate-q-proj with the ag_rs backend (0.5.17+)",
}

#: rules whose entries read the attention CP / MoE DP sizes (``sglang.attn_cp.tp_divisible`` is the shared one)
CP_SIZE_RULES = frozenset({"sglang.attn_cp.tp_divisible", "sglang.cp.tp_divisible_by_cp", "sglang.cp.pipeline",
                           "sglang.moe_dp.layout", "sglang.cp.aiter_allreduce_fusion"})
#: rules whose entries read ``moe_dp_size`` (DWDP sets it to 1 first)
MOE_DP_RULES = frozenset({"sglang.cp.pipeline", "sglang.moe_dp.layout", "sglang.cp.aiter_allreduce_fusion"})
KV_SHARDING_RULE = "sglang.kv_cache_sharding.pd_prefill"
#: ``handle_dwdp`` returns at once for ``dwdp_size <= 1`` (0.5.23 ``parallel_hook.py`` l.435-436; 0.5.17
#: ``server_args.py _handle_dwdp``)
DWDP_RULE = "sglang.dwdp.layout"
#: the flags that turn prefill context parallelism on, by their destinations (the legacy two up to 0.5.19; 0.5.13
#: spells the NSA one ``enable_nsa_prefill_context_parallel``)
PREFILL_CP_FLAGS = ("enable_prefill_cp", "enable_prefill_context_parallel", "enable_dsa_prefill_context_parallel",
                    "enable_nsa_prefill_context_parallel")
LEGACY_PREFILL_CP_FLAGS = PREFILL_CP_FLAGS[1:]
#: ``--elastic-ep-rejoin`` becomes ``ep_join_mode = "recover"`` (0.5.16 ``server_args.py _handle_elastic_ep``)
REJOIN_AS_JOIN_MODE_SINCE = Version("0.5.16")
DEEPSEEK_V4 = "DeepseekV4ForCausalLM"
#: the all-to-all backends whose refusals the ``sglang.a2a.*`` rules judge
A2A_CHECKED = frozenset({"flashinfer", "flashinfer_megamoe", "pplx"})




def _value(args: ResolvedArgs, dest: str, default: object) -> object:
    """The line's value, else the release's default (also where the parser's default is None)."""
    value = args.get(dest)
    return default if value is None else value


def values(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
           env: Mapping[str, str]) -> dict[str, object]:
    """What the context-parallel, KV-sharding and elastic-EP refusals read, as ``version`` holds it when it checks
    them (see the module's docstring); a value SGLang sets itself first is left out (the entry is not judged)."""
    legacy_cp = any(args.flag(d) for d in LEGACY_PREFILL_CP_FLAGS)
    ns: dict[str, object] = {
        # 0.5.9 - 0.5.13 parse --moe-data-parallel-size into moe_data_parallel_size (from_cli_args copies it,
        # 0.5.9 server_args.py l.5073)
        "moe_dp_size": _value(args, "moe_dp_size", _value(args, "moe_data_parallel_size", 1)),
        "enable_kv_cache_sharding": args.flag("enable_kv_cache_sharding"),
        "disaggregation_mode": _value(args, "disaggregation_mode", "null"),
        "node_rank": _value(args, "node_rank", 0),
    }
    if not legacy_cp:  # the legacy flags turn enable_prefill_cp on and pick a strategy (not resolved here)
        ns["enable_prefill_cp"] = args.flag("enable_prefill_cp")
        ns["cp_strategy"] = args.get("cp_strategy")
    if not args.flag("enable_deterministic_inference"):
        ns["enable_aiter_allreduce_fusion"] = args.flag("enable_aiter_allreduce_fusion")
    # elastic EP: the backend as parsed, the join mode after the rejoin alias; the parser's "none" choice is kept
    # out (the field's type names None, and no conversion of the string was found: not judged rather than guessed)
    backend = args.get("elastic_ep_backend")
    join_mode = args.get("ep_join_mode")
    rejoin = args.flag("elastic_ep_rejoin")
    if rejoin and join_mode is None and version >= REJOIN_AS_JOIN_MODE_SINCE:
        join_mode = "recover"
    algorithm = _value(args, "eplb_algorithm", "auto")
    max_ep = args.get("max_ep_size")
    if backend != "none":
        ns["elastic_ep_backend"] = backend
    ns.update({
        "ep_join_mode": join_mode,
        "elastic_ep_rejoin": rejoin,
        "eplb_algorithm": "elasticity_aware" if backend is not None and algorithm == "auto" else algorithm,
        "ep_join_rank_offset": _value(args, "ep_join_rank_offset", 0),
        "max_ep_size": max_ep,
        "elastic_ep_initial_size": args.get("elastic_ep_initial_size"),
    })
    if backend != "none":
        ns["scaling_active"] = backend is not None and isinstance(max_ep, int) and max_ep > layout.tensor_parallel_size
    a2a = _a2a_backend(args, model)
    if a2a is not None:
        ns["a2a_backend"] = ns["a2a_now"] = a2a   # handle_a2a_moe's locals (0.5.22 calls the second a2a_now)
    ns["flashinfer_a2a_dispatch_type"] = args.get("flashinfer_a2a_dispatch_type")
    ns["dwdp_size"] = _value(args, "dwdp_size", 1)
    ns["enable_two_batch_overlap"] = args.flag("enable_two_batch_overlap")
    ns["dcp_comm_backend"] = _dcp_comm_backend(args)
    ns["dcp_replicate_q_proj"] = args.get("dcp_replicate_q_proj")
    ns["deepep_mode"] = _value(args, "deepep_mode", "auto")
    return ns


def _a2a_backend(args: ResolvedArgs, model: ModelSpec) -> str | None:
    """The MoE all-to-all backend ``handle_a2a_moe`` reads (``resolved_view(...).moe_a2a_backend``): the line's,
    except where SGLang rewrites it first, which is not resolved here (None) when the line names a backend the
    ``sglang.a2a.*`` rules judge: ``--enable-waterfill`` (deepep, 0.5.23 ``overrides.py _a2a_backend_overrides``
    l.1596-1607), ``--dwdp-size`` (none, ``parallel_hook.py`` l.498), ``--moe-runner-backend megamoe`` (megamoe,
    ``mega_moe_hook.py`` l.271-276; 0.5.18 ``server_args.py`` l.3790-3802), MLA prefill CP (deepep,
    ``model_overrides/deepseek_v2.py`` l.117 / l.201) and MiniMax M3 (megamoe, ``model_overrides/minimax_m3.py``
    l.112). Every rewrite lands outside ``A2A_CHECKED``, so a line that names another backend keeps its verdict."""
    given = _value(args, "moe_a2a_backend", "none")
    arch = model.architectures[0] if model.architectures else ""
    dwdp = args.get("dwdp_size")
    rewritten = (args.flag("enable_waterfill") or (isinstance(dwdp, int) and dwdp > 1)
                 or args.get("moe_runner_backend") == "megamoe"
                 or (model.is_mla and any(args.flag(d) for d in PREFILL_CP_FLAGS)) or arch.startswith("MiniMaxM3"))
    if given in A2A_CHECKED and rewritten:
        return None
    return str(given)


def _dcp_comm_backend(args: ResolvedArgs) -> object:
    """``--dcp-comm-backend`` as ``handle_decode_context_parallelism`` reads it, after ``_dcp_comm_backend_default``
    (0.5.23 ``arg_groups/overrides.py`` l.1374-1396; 0.5.20 l.1430): the line's; unset, ``ag_rs`` up to DCP 1, and
    above it ``fi_a2a`` where FlashInfer's MNNVL all-to-all fits, else ``a2a`` on CUDA. Those two answer every check
    of the function alike on CUDA (both are in its ``("a2a", "fi_a2a")``; only the off-CUDA one tells them apart),
    so ``a2a`` stands for either (from 0.5.20 the parser leaves the flag unset; 0.5.17 - 0.5.19 default it to
    ``ag_rs`` in the parser, which the line's value then is, and make the same checks in ``_handle_dcp_validation``:
    0.5.17 ``server_args.py:3824-3848``, 0.5.19 ``arg_groups/parallel_hook.py:136-160``)."""
    given = args.get("dcp_comm_backend")
    if given is not None:
        return given
    dcp = _value(args, "dcp_size", 1)
    return "ag_rs" if not isinstance(dcp, int) or dcp <= 1 else "a2a"


def in_force(rules: Sequence[str], args: ResolvedArgs, model: ModelSpec,
             held: Callable[[str], bool] = lambda rule: True) -> tuple[list[str], list[str]]:
    """``rules`` less those this module's frame does not judge for the line, and why in words: the KV-sharding rule
    without ``--enable-kv-cache-sharding`` (the release returns before it); the CP-size rules where SGLang sets the
    attention CP size itself (an MLA model with prefill CP, DeepSeek V4); the MoE-DP ones with ``--dwdp-size`` > 1.
    ``held``: whether the release judged holds a rule (a rule it does not hold is not named as not judged)."""
    notes: list[str] = []
    drop: set[str] = set()
    if not args.flag("enable_kv_cache_sharding"):
        drop.add(KV_SHARDING_RULE)
    dwdp = args.get("dwdp_size")
    if not (isinstance(dwdp, int) and dwdp > 1):
        drop.add(DWDP_RULE)
    prefill_cp = any(args.flag(d) for d in PREFILL_CP_FLAGS)
    arch = model.architectures[0] if model.architectures else ""
    if ((model.is_mla and prefill_cp) or arch == DEEPSEEK_V4) and any(held(r) for r in CP_SIZE_RULES):
        drop |= CP_SIZE_RULES
        notes.append("the attention context-parallel size SGLang sets for this model "
                     + ("(DeepSeek V4, arg_groups/deepseek_v4_hook.py)" if arch == DEEPSEEK_V4 else
                        "with prefill context parallelism (an MLA model: attn_cp_size = tp_size // attn_dp_size, "
                        "arg_groups/model_overrides/deepseek_v2.py)")
                     + " is not resolved: its context-parallel size checks are not judged")
    if isinstance(dwdp, int) and dwdp > 1 and any(held(r) for r in MOE_DP_RULES):
        drop |= MOE_DP_RULES
        notes.append("--dwdp-size sets moe_dp_size and ep_size itself (arg_groups/parallel_hook.py handle_dwdp): "
                     "the MoE data-parallel checks are not judged")
    return [r for r in rules if r not in drop], notes


def judge(ask: Ask) -> Judged:
    """The rules of this module in force (``in_force``), over the shared namespace (``values`` adds to it)."""
    return ask.judge({}, RULES)
