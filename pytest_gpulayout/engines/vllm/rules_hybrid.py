"""vLLM's Mamba / hybrid-model and pooling options that a command line alone decides, by release.

Three configs, each judged in a frame of its own (their entries read ``self.backend``, ``values`` and
``self.cache_config.enable_prefix_caching``, names other rules read with another meaning):

- ``PoolerConfig`` (``--pooler-config``, 0.14+): vLLM builds it while it parses the line (``parse_dataclass``:
  ``TypeAdapter(PoolerConfig).validate_json``, engine/arg_utils.py:369-374 in 0.33.0), so its ``__post_init__``
  and, from 0.26, its ``reject_removed_parameters`` validator refuse the flag's value whatever the model is, printed
  by argparse as the flag's invalid value. Refused: a deprecated key with its replacement (``logit_bias`` with
  ``logit_mean``, ``logit_scale`` with ``logit_sigma``, 0.20-0.22.1, config/pooler.py:121-149 in 0.20.0), a
  ``logit_scale`` of 0 (0.20-0.22.1) or a ``logit_sigma`` of 0 (0.20+, config/pooler.py:139-140 in 0.33.0),
  and ``pooling_type`` with ``seq_pooling_type`` or ``tok_pooling_type`` (0.14+, :142-150 in 0.33.0). The removed
  ``normalize`` key (0.26+, :125-134 in 0.33.0) is refused by the line's parse first, as an unknown key.
  A value that is not a number where the release types a float is pydantic's to refuse first (``rules_fields``):
  that key is left out, its entries are not judged.
- ``MambaConfig.validate_ssu_algorithm`` (0.27+, config/mamba.py:66-81 in 0.33.0), which
  ``EngineArgs.create_engine_config`` calls for every model (engine/arg_utils.py:2768-2786 in 0.33.0, 2360-2378 in
  0.27.0): a ``--mamba-ssu-algorithm`` with a ``--mamba-backend`` other than flashinfer. It returns first without
  the flag, so the frame is only built with it; its other raise (an algorithm outside ``MambaSSUAlgorithm``) is the
  parser's: the flag's choices are that literal's.
- ``VllmConfig.validate_mamba_block_size`` (0.11.1+, config/vllm.py:3440-3452 in 0.33.0, 1055-1067 in 0.11.1): a
  ``--mamba-block-size`` other than the model's ``max_model_len`` with prefix caching off. It is refused where the
  line turns prefix caching off (``--no-enable-prefix-caching``): the release never turns an explicit off back on,
  and the hybrid hooks set the Mamba block size only where the line leaves it unset (model_executor/models/
  config.py:779-787 in 0.33.0, 291 in 0.11.1). Prefix caching left to the release's default, or turned on (which
  0.11.1-0.13 turn off again on a hybrid model without Mamba prefix caching, model_executor/models/config.py:305 in
  0.11.1; 0.33.0 on an encoder-only instance or Unlimited-OCR, config/vllm.py:1523-1534), is not resolved here:
  the entry is named, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.refusals import Judged, Refusal

POOLER_OPTIONS = "vllm.pooler.options"
SSU_ALGORITHM_BACKEND = "vllm.mamba.ssu_algorithm_backend"
BLOCK_SIZE_WITHOUT_PREFIX_CACHING = "vllm.mamba.block_size_without_prefix_caching"

RULES: Mapping[str, str] = {
    POOLER_OPTIONS: "--pooler-config with a deprecated key and its replacement, a logit_scale / logit_sigma of 0, "
                    "or pooling_type with seq_pooling_type / tok_pooling_type "
                    "(PoolerConfig, 0.14+)",
    SSU_ALGORITHM_BACKEND: "--mamba-ssu-algorithm without --mamba-backend flashinfer (MambaConfig, 0.27+)",
    BLOCK_SIZE_WITHOUT_PREFIX_CACHING: "--mamba-block-size other than max_model_len with prefix caching turned off "
                                       "(VllmConfig, 0.11.1+)",
}
FRAMED = frozenset(RULES)

#: ``PoolerConfig``'s float fields the raises read
_POOLER_FLOATS = ("logit_bias", "logit_mean", "logit_scale", "logit_sigma")
_POOLER_TYPES = ("pooling_type", "seq_pooling_type", "tok_pooling_type")




def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def pooler_frame(args: ResolvedArgs) -> dict[str, object] | None:
    """``PoolerConfig``'s fields as ``--pooler-config`` gives them (an unset key is the field's default, None);
    None without the flag or where its text is not a JSON object (the parse refuses it first)."""
    given = args.json_object("pooler_config")
    if given is None:
        return None
    out: dict[str, object] = {"values": dict(given)}
    for key in _POOLER_FLOATS:
        value = given.get(key)
        if value is None or _number(value):
            out[f"self.{key}"] = value
    for key in _POOLER_TYPES:
        value = given.get(key)
        if value is None or isinstance(value, str):
            out[f"self.{key}"] = value
    if "self.pooling_type" in out:
        out["(pooling_type := self.pooling_type)"] = out["pooling_type := self.pooling_type"] = out[
            "self.pooling_type"]
    return out


def ssu_frame(args: ResolvedArgs) -> dict[str, object] | None:
    """``MambaConfig`` as ``create_engine_config`` fills it before ``validate_ssu_algorithm``: the backend from
    ``--mamba-backend`` (``MambaBackendEnum[name.upper()]``, default triton) and the algorithm; None without
    ``--mamba-ssu-algorithm`` (the check returns first)."""
    algorithm = args.get("mamba_ssu_algorithm")
    if algorithm is None:
        return None
    backend = args.get("mamba_backend")
    return {"self.ssu_algorithm": algorithm, "self.backend": str(backend or "triton").upper(),
            "MambaBackendEnum.FLASHINFER": "FLASHINFER", "MambaBackendEnum.TRITON": "TRITON"}


def block_size_frame(args: ResolvedArgs, base: Mapping[str, object]) -> dict[str, object] | None:
    """``validate_mamba_block_size``'s local ``mamba_block_size_is_set`` (the Mamba block size given and other than
    ``max_model_len``: the ``--max-model-len`` given, else the length the release derives, ``rules_model``) and
    prefix caching where the line turns it off; None where the length cannot be known (the entry is named)."""
    block = args.get("mamba_block_size")
    out: dict[str, object] = {}
    if args.is_set("enable_prefix_caching") and args.get("enable_prefix_caching") is False:
        out["self.cache_config.enable_prefix_caching"] = False
    if not isinstance(block, int) or isinstance(block, bool):
        out["mamba_block_size_is_set"] = False
        return out
    given = args.get("max_model_len") if args.is_set("max_model_len") else None
    length: object = given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else None
    if length is None and not args.is_set("max_model_len"):
        derived = base.get("derived_max_model_len")
        length = int(derived) if isinstance(derived, (int, float)) and not isinstance(derived, bool) \
            and float(derived).is_integer() else None
    if length is None:
        return out
    out["mamba_block_size_is_set"] = block != length
    return out


def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each in its frame over the shared namespace."""
    book, version, base, rules, args = ask.book, ask.version, ask.values, ask.active, ask.args
    refusals: list[Refusal] = []
    not_judged: list[str] = []
    for rule, frame in ((POOLER_OPTIONS, pooler_frame(args)), (SSU_ALGORITHM_BACKEND, ssu_frame(args)),
                        (BLOCK_SIZE_WITHOUT_PREFIX_CACHING, block_size_frame(args, base))):
        if rule not in rules or frame is None:
            continue
        one = book.judge(version, {**base, **frame}, rules=[rule])
        refusals += one.refusals
        not_judged += [n for n in one.not_judged if n not in not_judged]
    return Judged(tuple(refusals), tuple(not_judged))
