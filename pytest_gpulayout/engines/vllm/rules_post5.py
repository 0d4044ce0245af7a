"""vLLM's auxiliary output (returned routed experts) on a runner other than generate, and HiSparseConnector's
``host_pool_gib``, by release.

**HiSparse's host pool** (0.30+): with HiSparse on (``--attention-config``'s hisparse_config, or a
HiSparseConnector, ``rules_post.hisparse_values``) the KV cache planner asks ``get_hisparse_host_pool_bytes``
(v1/core/kv_cache_planning.py:670-671 in 0.33.0, v1/core/kv_cache_utils.py:1677 in 0.30.0), which reads
``hisparse_host_pool_gib`` (config/kv_transfer.py:16-47, the same in 0.30.0-0.33.0): the HiSparseConnector entries
of ``--kv-transfer-config`` (its own, or a MultiConnector's ``connectors``): more than one is refused, one without
``host_pool_gib`` is refused, and a ``float(host_pool_gib)`` not above 0 is refused. Two rules, because the
release's name ``host_pool_gib`` is the raw value at the first check and its float at the second. A value
``float`` cannot convert (its own ValueError, not a ledger entry) leaves the size check not judged; so does
``--kv-offloading-size``, whose offloading connector ``VllmConfig`` writes over the line's connector first
(``_post_init_kv_transfer_config``, config/vllm.py:1151-1185 in 0.33.0).

**AuxOutput on a non-generate runner**:

``VllmConfig._verify_aux_output_compatibility`` (0.31+, config/vllm.py:1187-1243 in 0.33.0, 1160-1214 in 0.31.0)
returns first without an auxiliary output (``AuxOutputConfig.enabled``: ``enable_return_routed_experts``, from
``--enable-return-routed-experts`` or ``--aux-output-config``, engine/arg_utils.py:888-891 in 0.33.0), then refuses
the V1 model runner (``rules_post2``'s ``vllm.model.routed_experts_aux_output``) and then a model runner other
than generate (config/vllm.py:1203-1204 in 0.33.0, 1176-1177 in 0.31.0): "AuxOutput Connector only supports
generate runners."

The runner is the one ``ModelConfig`` resolves (``_get_runner_type``, config/model.py:1307-1329 in 0.33.0): an
explicit ``--runner`` is taken as given; ``--runner auto`` on a class the release's interface facts call a pooling
one, or with a pooling ``--convert`` (0.22+), is pooling (``rules_model3.served_runner``). ``--runner auto`` on a
text-generation class is generate unless the repository carries a Sentence Transformers pooling config
(``get_pooling_config``, config/model.py:1289-1291 in 0.33.0), which is not read: that entry is left NOT JUDGED
there, never guessed. It is judged only where the V2 model runner is resolved on (``rules_post2.
use_v2_model_runner``): with V1 the earlier raise refuses first, unresolved the check before it is not judged.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.engines.vllm import rules_model3, rules_post, rules_post2
from pytest_gpulayout.refusals import Judged

AUX_RUNNER = "vllm.model.aux_output_generate_runner"
HISPARSE_CONNECTOR = "vllm.kv_transfer.hisparse_connector_host_pool"
HISPARSE_POOL_SIZE = "vllm.kv_transfer.hisparse_host_pool_positive"

RULES: Mapping[str, str] = {
    AUX_RUNNER: "--enable-return-routed-experts (the AuxOutput connector) with a runner other than generate "
                "(VllmConfig._verify_aux_output_compatibility, 0.31+)",
    HISPARSE_CONNECTOR: "HiSparse with more than one HiSparseConnector, or one without host_pool_gib, in "
                        "--kv-transfer-config (hisparse_host_pool_gib, 0.30+)",
    HISPARSE_POOL_SIZE: "HiSparse with a HiSparseConnector host_pool_gib not above 0 (hisparse_host_pool_gib, "
                        "0.30+)",
}

#: the names the entry reads, left out of the mapping where the runner is not resolved
_RUNNER_KEYS = ("self.model_config.runner_type", "runner_type")


def aux_enabled(ask: Ask) -> bool:
    """``AuxOutputConfig.enabled``: ``--enable-return-routed-experts`` or ``--aux-output-config``'s key."""
    given = ask.args.json_object("aux_output_config") or {}
    return bool(ask.args.get("enable_return_routed_experts")) or bool(given.get("enable_return_routed_experts"))


def aux_runner(ask: Ask) -> str | None:
    """The model runner ``ModelConfig`` resolves, where the inputs decide it (see the module docstring); None where
    a Sentence Transformers config of the repository (not read) or an unknown class could make it pooling."""
    runner = str(ask.args.get("runner") or "auto")
    if runner != "auto":
        return runner
    pooling_class = rules_model3.known_class(ask)
    if pooling_class is None:
        return None
    served = rules_model3.served_runner(ask, pooling_class)
    return served if served == "pooling" else None


def runner_values(ask: Ask) -> dict[str, object] | None:
    """The shared namespace with the runner the check reads (absent where it is not resolved); None where the
    check is not reached (no auxiliary output, or the V1 model runner / an unresolved runner choice first)."""
    if not aux_enabled(ask):
        return None
    hisparse = rules_post.hisparse_values(ask.args, ask.model, ask.env)["self.attention_config.hisparse_config"]
    if rules_post2.use_v2_model_runner(ask.args, hisparse is not None, ask.env) is not True:
        return None
    values = {k: v for k, v in ask.values.items() if k not in _RUNNER_KEYS}
    runner = aux_runner(ask)
    if runner is not None:
        values["self.model_config.runner_type"] = runner
    return values


def hisparse_connectors(kv_transfer: Mapping[str, object]) -> list[Mapping[str, object]]:
    """``hisparse_host_pool_gib``'s ``entries``: the ``kv_connector_extra_config`` of each HiSparseConnector of
    ``--kv-transfer-config`` (a MultiConnector's ``connectors`` list, else the config itself)."""
    extra = kv_transfer.get("kv_connector_extra_config")
    extra = extra if isinstance(extra, Mapping) else {}
    if kv_transfer.get("kv_connector") == "MultiConnector":
        listed = extra.get("connectors", [])
        connectors = [c for c in listed if isinstance(c, Mapping)] if isinstance(listed, list) else []
    else:
        connectors = [{"kv_connector": kv_transfer.get("kv_connector"), "kv_connector_extra_config": extra}]
    out: list[Mapping[str, object]] = []
    for connector in connectors:
        if connector.get("kv_connector") == "HiSparseConnector":
            own = connector.get("kv_connector_extra_config", {})
            out.append(own if isinstance(own, Mapping) else {})
    return out


def pool_gib(value: object) -> float | None:
    """``float(host_pool_gib)`` as Python converts the JSON value; None where it raises."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def hisparse_frames(ask: Ask) -> tuple[dict[str, object] | None, dict[str, object] | None]:
    """The connector check's and the size check's mappings; None where HiSparse is off (not asked), the line's
    connector is written over (``--kv-offloading-size``) or an earlier check refuses / returns."""
    hisparse = rules_post.hisparse_values(ask.args, ask.model, ask.env)["self.attention_config.hisparse_config"]
    kv_transfer = ask.args.json_object("kv_transfer_config") or {}
    if hisparse is None or ask.args.get("kv_offloading_size") is not None:
        return None, None
    entries = hisparse_connectors(kv_transfer)
    if not entries:
        return None, None     # the planner's own raise (not a config-time entry)
    raw = entries[0].get("host_pool_gib")
    first: dict[str, object] = {"entries": entries, "host_pool_gib": raw}
    if len(entries) > 1 or raw is None:
        return first, None
    size = pool_gib(raw)
    return first, ({"entries": entries} if size is None else {"entries": entries, "host_pool_gib": size})


def judge(ask: Ask) -> Judged:
    """The rules of this module where they are in force, each in its own mapping."""
    version, book = ask.version, ask.book
    parts: list[Judged] = []
    rules = ask.among([AUX_RUNNER])
    values = runner_values(ask) if rules else None
    if values is not None:
        parts.append(book.judge(version, values, rules=rules))
    if ask.among([HISPARSE_CONNECTOR, HISPARSE_POOL_SIZE]):
        first, size = hisparse_frames(ask)
        for rule, frame in ((HISPARSE_CONNECTOR, first), (HISPARSE_POOL_SIZE, size)):
            if frame is not None and ask.among([rule]):
                parts.append(book.judge(version, frame, rules=[rule]))
    return combine(parts)
