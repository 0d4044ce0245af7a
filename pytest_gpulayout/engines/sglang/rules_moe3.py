"""SGLang's EP dispatch and expert-metric refusals and the native gRPC port check: an EP dispatch algorithm that
picks a replica per rank without an all-to-all backend, the removed EPLB balancedness variable, and a gRPC port
equal to the HTTP port, by release.

* ``--ep-dispatch-algorithm static`` / ``lp`` with the all-to-all backend SGLang resolves being ``none``
  (``ServerArgs._handle_eplb_and_dispatch`` 0.5.17 ``server_args.py`` l.6811-6830, 0.5.18 l.7032-7051; from 0.5.19
  ``arg_groups/parallel_hook.py handle_eplb_and_dispatch``, 0.5.23 l.764-788): without an all-to-all backend every
  EP rank runs the MoE over the same tokens, so the replica pick has to agree across ranks. The backend is the one
  ``rules_moe.a2a_backend`` resolves (the line's, ``none`` by default; not resolved where SGLang rewrites it
  first: the entry is then not judged). The algorithm is the line's: the only rewrite before the check sets an
  unset one to ``dynamic`` exactly where the check would refuse ``static`` (l.771-780 in 0.5.23), so it never
  refuses SGLang's own pick.
* ``SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC`` in the launch environment, whatever its value (0.5.18
  ``ServerArgs._handle_expert_distribution_metrics`` l.7236-7243, 0.5.19 - 0.5.20 ``parallel_hook.py
  handle_expert_distribution_metrics`` l.635 / l.590; run for every line: 0.5.18 ``server_args.py`` l.3732, 0.5.20
  ``pipeline.py`` l.314): the variable is read as ``name in os.environ``.
* The native gRPC server (0.5.11 - 0.5.15.post1 ``ServerArgs.check_server_args``, 0.5.11 l.6953-6960): env-only
  (``SGLANG_ENABLE_GRPC``, an ``EnvBool``), on ``SGLANG_GRPC_PORT`` or ``--port`` + 10000 (0.5.11 l.1036-1045;
  ``--port`` is not rewritten before the check); a gRPC port equal to ``--port`` is refused. A value the release's
  ``EnvBool`` / ``EnvInt`` cannot parse (``environ.py`` l.119-136 in 0.5.11) raises in its own words before this
  check: the entry is then not judged.
* Nemotron-H with an expert remap (``--enable-eplb``, ``--ep-num-redundant-experts`` > 0 or an
  ``--init-expert-location`` other than ``trivial``; 0.5.23 ``model_overrides/nemotron_h.py`` l.57-63 calls
  ``_validate_expert_remap``, l.151-166): the ``flashinfer_trtllm`` runner routes inside its kernel, and
  ``flashinfer_cutedsl`` with EPLB and no all-to-all backend does not migrate its expert scales. The runner is the
  line's: the overrides run in ``handle_model_specific_adjustments`` (``pipeline.py`` l.225), before
  ``handle_moe_kernel_config`` / ``handle_a2a_moe`` (l.294-295) rewrite it; only ``handle_mega_moe`` (l.49,
  ``mega_moe_hook.py`` l.261-276) rewrites ``--moe-runner-backend megamoe`` to auto first. The all-to-all backend is
  ``rules_moe.a2a_backend``'s (not judged where SGLang rewrites it).
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang import rules_moe
from pytest_gpulayout.refusals import Judged

DISPATCH_RULE = "sglang.eplb.rank_invariant_dispatch"
BALANCEDNESS_RULE = "sglang.env.eplb_balancedness_metric"
GRPC_RULE = "sglang.grpc.port_equals_http"
REMAP_RULE = "sglang.nemotron_h.expert_remap_runner"

RULES: Mapping[str, str] = {
    DISPATCH_RULE: "--ep-dispatch-algorithm static / lp with the all-to-all backend resolved to none (0.5.17+)",
    BALANCEDNESS_RULE: "SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC set in the launch environment (0.5.18 - 0.5.20: "
                       "removed)",
    GRPC_RULE: "SGLANG_ENABLE_GRPC with a gRPC port (SGLANG_GRPC_PORT) equal to --port (0.5.11 - 0.5.15.post1)",
    REMAP_RULE: "Nemotron-H with EPLB / redundant experts / a non-trivial expert location and the flashinfer_trtllm "
                "runner, or EPLB with flashinfer_cutedsl and no all-to-all backend (0.5.23)",
}
#: the architectures ``_nemotron_h_overrides`` is registered for (0.5.23 ``model_overrides/nemotron_h.py`` l.17-21)
NEMOTRON_H_ARCHS = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3")

BALANCEDNESS_ENV = "SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC"
GRPC_ENABLE_ENV = "SGLANG_ENABLE_GRPC"
GRPC_PORT_ENV = "SGLANG_GRPC_PORT"
#: ``EnvBool.parse`` (0.5.11 ``environ.py`` l.119-126)
_TRUE = ("true", "1", "yes", "y")
_FALSE = ("false", "0", "no", "n")
#: ``--port``'s parser default
PORT_DEFAULT = 30000
#: 0.5.11 ``server_args.py`` l.1043-1045: the gRPC port without SGLANG_GRPC_PORT
GRPC_PORT_OFFSET = 10000


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool | None:
    """``EnvBool(default).get()`` over the launch environment; None for a value it refuses to parse."""
    if name not in env:
        return default
    value = env[name].lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None


def grpc_port(env: Mapping[str, str], port: int) -> int | None:
    """The gRPC port the release sets (SGLANG_GRPC_PORT, else ``port`` + 10000); None for a value ``EnvInt``
    refuses."""
    if GRPC_PORT_ENV not in env:
        return port + GRPC_PORT_OFFSET
    try:
        return int(env[GRPC_PORT_ENV])
    except ValueError:
        return None


def _dispatch_frame(ask: Ask) -> dict[str, object] | None:
    a2a = rules_moe.a2a_backend(ask.args, ask.model)
    if a2a is None:
        return None
    return {"needs_rank_invariant_dispatch": a2a == "none",
            "ep_dispatch_algorithm": ask.args.get("ep_dispatch_algorithm")}


def _grpc_frame(ask: Ask) -> dict[str, object] | None:
    enabled = env_bool(ask.env, GRPC_ENABLE_ENV, False)
    port = ask.args.get("port", PORT_DEFAULT)
    if enabled is None or not isinstance(port, int):
        return None
    grpc = grpc_port(ask.env, port)
    if grpc is None:
        return None
    return {"enable_grpc": enabled, "grpc_port": grpc, "port": port}


def uses_expert_remap(ask: Ask) -> bool:
    """``uses_expert_remap`` of ``_nemotron_h_overrides`` (0.5.23 l.57-61), over the line's flags."""
    redundant = ask.args.get("ep_num_redundant_experts", 0)
    return (bool(ask.args.get("enable_eplb", False)) or (isinstance(redundant, int) and redundant > 0)
            or ask.args.get("init_expert_location", "trivial") != "trivial")


def _remap_frame(ask: Ask) -> dict[str, object]:
    out: dict[str, object] = {"enable_eplb": bool(ask.args.get("enable_eplb", False))}
    runner = ask.args.get("moe_runner_backend", "auto")
    if runner != "megamoe":
        out["moe_runner_backend"] = runner
    a2a = rules_moe.a2a_backend(ask.args, ask.model)
    if a2a is not None:
        out["moe_a2a_backend"] = a2a
    return out


def judge(ask: Ask) -> Judged:
    """The rules of this module in force; an entry whose value is not resolved is left not judged (its name is
    absent from the mapping judged)."""
    arch = ask.model.architectures[0] if ask.model.architectures else ""
    rules = [r for r in ask.among(RULES) if r != REMAP_RULE or (arch in NEMOTRON_H_ARCHS and uses_expert_remap(ask))]
    if not rules:
        return Judged()
    values: dict[str, object] = {**ask.values, "os.environ": dict(ask.env)}
    for name in ("needs_rank_invariant_dispatch", "enable_grpc", "grpc_port", "moe_runner_backend",
                 "moe_a2a_backend"):
        values.pop(name, None)
    if DISPATCH_RULE in rules:
        values.update(_dispatch_frame(ask) or {})
    if GRPC_RULE in rules:
        values.update(_grpc_frame(ask) or {})
    if REMAP_RULE in rules:
        values.update(_remap_frame(ask))
    return ask.book.judge(ask.version, values, rules=rules)
