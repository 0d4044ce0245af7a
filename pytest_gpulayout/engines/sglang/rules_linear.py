"""SGLang's ReplaySSM refusals that read the launch environment or the PD role, by release.

* Ragged verify (0.5.17+, ``ServerArgs._handle_linear_attn_backend``, 0.5.17 ``server_args.py`` l.6187-6213; from
  0.5.19 ``arg_groups/attention_hook.py handle_linear_attn_backend``, 0.5.23 l.462-489): with
  ``--enable-linear-replayssm-spec`` and ``SGLANG_RAGGED_VERIFY_MODE`` other than ``static`` (``EnvStr("static")``,
  0.5.23 ``environ.py`` l.1572; ``read_ragged_verify_mode``, ``speculative/ragged_verify.py`` l.19-27, the same
  cap-accept / compact / static modes in every release that holds the check), the algorithm must be DSPARK or
  DFLASH (``(cfg.speculative_algorithm or "").upper()``: the line's, which nothing before this hook rewrites to
  either; the speculative hook runs later, 0.5.23 ``pipeline.py`` l.253 / l.306) and ``verify``, re-read from
  ``cfg.linear_attn_verify_backend``, triton or nv_cutedsl. That re-read is the line's, except where a hook
  before it declares one: Kimi's and (0.5.22+) GLM-5-Next's speculative defaults pin nv_cutedsl for an unset
  verify backend (0.5.23 ``kimi_k3_hook.py`` l.18-39, ``glm5_next_hook.py`` l.18-34; 0.5.18 ``kimi_k3_hook.py``
  l.12-23), and (0.5.22+) ``SGLANG_ENABLE_PP_SPEC`` with a KDA model falls a flashinfer verify back to triton
  (0.5.23 ``attention_hook.py`` l.346-363; any model, its KDA test is not resolved): there ``verify`` is
  not claimed. A mode SGLang does not know makes
  ``read_ragged_verify_mode`` raise its own error first: not judged.
* ReplaySSM under PD disaggregation (0.5.15+): ``--enable-linear-replayssm`` refuses any ``--disaggregation-mode``
  but ``null`` (0.5.15 ``server_args.py`` l.4760-4768; 0.5.23 ``attention_hook.py`` l.423-433), 0.5.16's
  ``--enable-gdn-replayssm-spec`` likewise (0.5.16 l.5393-5402), and ``--enable-linear-replayssm-spec`` (0.5.17+)
  a PD prefill server (0.5.17 l.6214-6219; 0.5.23 l.490-495). The mode is the line's: no hook before this one
  rewrites it (the diffusion-LLM hook that resets it runs later: 0.5.18 ``server_args.py`` l.3693 / l.3767,
  0.5.23 ``pipeline.py`` l.253 / l.342).

The spec-verify ring length of 0.5.16 (``_validate_gdn_replayssm_spec_ring``) reads the draft-token count
``handle_speculative_decoding`` derives, which is not resolved here (left open).
"""

from __future__ import annotations

from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.rules_mamba import REPLAYSSM_FLAGS
from pytest_gpulayout.engines.sglang.rules_model import Frame
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged

RAGGED = "sglang.linear.ragged_verify"
PD = "sglang.linear.replayssm_pd"

RULES: Mapping[str, str] = {
    RAGGED: "--enable-linear-replayssm-spec with SGLANG_RAGGED_VERIFY_MODE other than static, off DSPARK / DFLASH "
            "or without a triton / nv_cutedsl --linear-attn-verify-backend (0.5.17+)",
    PD: "--enable-linear-replayssm (0.5.16: --enable-gdn-replayssm-spec) under PD disaggregation, or "
        "--enable-linear-replayssm-spec on a PD prefill server (0.5.15+)",
}

RAGGED_ENV = "SGLANG_RAGGED_VERIFY_MODE"
#: ``RaggedVerifyMode``'s values (``speculative/ragged_verify.py`` l.13-16, 0.5.16 - 0.5.23) and its default
RAGGED_MODES = ("static", "cap-accept", "compact")
RAGGED_DEFAULT = "static"
#: the mode test as the ledger holds it (an identity test against the enum member: given as its value)
RAGGED_TEST = "ragged_mode is not RaggedVerifyMode.STATIC"
PP_SPEC_ENV = "SGLANG_ENABLE_PP_SPEC"
#: 0.5.22 first falls a flashinfer verify backend back to triton for KDA under ``SGLANG_ENABLE_PP_SPEC``
PP_SPEC_SINCE = Version("0.5.22")
#: models whose speculative hook pins the verify backend when the line leaves it unset, and since when
#: (Kimi: 0.5.18 ``kimi_k3_hook.py``; GLM-5-Next: 0.5.22 ``glm5_next_hook.py``)
VERIFY_PINNED: tuple[tuple[str, Version], ...] = (("Kimi", Version("0.5.18")), ("Glm5Next", Version("0.5.22")))
#: ``EnvBool``'s false spellings (lowered, 0.5.23 ``environ.py`` l.143-150): only an unset or false switch keeps the
#: line's verify backend (any other value may turn it on, or is SGLang's own error)
_FALSE = frozenset({"false", "0", "no", "n"})


def _verify(args: ResolvedArgs, model: ModelSpec, listed: Version, env: Mapping[str, str]) -> str | None:
    """Why ``cfg.linear_attn_verify_backend`` at the ragged check is not the line's (None: it is)."""
    verify = args.get("linear_attn_verify_backend")
    arch = model.architectures[0] if model.architectures else ""
    if verify is None:
        for prefix, since in VERIFY_PINNED:
            if arch.startswith(prefix) and listed >= since:
                return f"{arch}'s speculative defaults may pin the verify backend"
    pp_spec = env.get(PP_SPEC_ENV)
    # ``uses_kda_attention`` reads the model's text config too (0.5.23 ``configs/model_config.py`` l.230): any
    # model is taken as one that may be KDA
    if (listed >= PP_SPEC_SINCE and pp_spec is not None and pp_spec.lower() not in _FALSE
            and verify in (None, "flashinfer")):
        return f"{PP_SPEC_ENV} with a KDA model may fall the verify backend back to triton"
    return None


def frame(args: ResolvedArgs, model: ModelSpec, listed: Version, env: Mapping[str, str]) -> Frame:
    """The values ``RULES``'s entries read at ``listed`` (see the module docstring)."""
    values: dict[str, object] = {dest: bool(args.get(dest)) for dest in REPLAYSSM_FLAGS if dest in args.values}
    mode = args.get("disaggregation_mode")
    values["disaggregation_mode"] = "null" if mode is None else mode
    rules: list[str] = [PD]
    notes: list[str] = []
    if values.get("enable_linear_replayssm_spec"):
        ragged = env.get(RAGGED_ENV, RAGGED_DEFAULT)
        why = _verify(args, model, listed, env)
        if ragged not in RAGGED_MODES:
            notes.append(f"{RAGGED_ENV}={ragged!r} is not a mode SGLang {listed} knows (it refuses it itself): "
                         f"{RULES[RAGGED]} is not judged")
        elif ragged != RAGGED_DEFAULT and why is not None:
            notes.append(f"{why}: {RULES[RAGGED]} is not judged")
        else:
            rules.append(RAGGED)
            algorithm = args.get("speculative_algorithm")
            values.update({RAGGED_TEST: ragged != RAGGED_DEFAULT, "ragged_mode.value": ragged,
                           "_algo": (algorithm if isinstance(algorithm, str) else "").upper(),
                           "speculative_algorithm": algorithm,
                           "verify": args.get("linear_attn_verify_backend")})
    return Frame(values, tuple(rules), tuple(notes))


def judge(ask: Ask) -> Judged:
    """The rules ``frame`` names, in that frame over the shared namespace, and what it could not resolve."""
    framed = frame(ask.args, ask.model, ask.listed, ask.env)
    in_frame = ask.judge(framed.values, framed.rules)
    return Judged(in_frame.refusals, framed.notes + in_frame.not_judged)
