"""How many GPUs an SGLang line uses, and how its TP group is cut: attention DP inside TP, release by release.

SGLang's ``--dp-size`` means two things. Without attention DP it counts replicas: the DP controller starts
``dp_size`` TP groups, each on the next ``tp_size x pp_size`` GPUs (``managers/data_parallel_controller.py
launch_dp_schedulers``: ``base_gpu_id += tp_size * pp_size * gpu_id_step``), so ``--tp 2 --dp 4`` is 8 GPUs.
With ``--enable-dp-attention`` it counts attention-DP groups *inside* one TP group
(``launch_dp_attention_schedulers``: one TP group, every rank its own scheduler): ``--tp 8 --dp 8
--enable-dp-attention`` is 8 GPUs, each attention layer split over ``attn_tp_size = tp_size // dp_size``
ranks (``layers/dp_attention.py compute_dp_attention_world_info``: ``attn_dp_size = dp_size if
enable_dp_attention else 1``; ``attn_tp_size = tp_size // attn_dp_size // attn_cp_size``), while the MoE and
MLP layers stay split over the whole TP group. Read per release:

* 0.4.6 - 0.5.21 (``server_args.py``: 0.4.6 l.290-296 ``__post_init__``, 0.5.10 l.2634-2641
  ``_handle_data_parallelism``): ``dp_size == 1`` turns ``enable_dp_attention`` off; with it on,
  ``assert tp_size % dp_size == 0`` (its refusal is the config check's, ``config_checks.py``).
* 0.5.22+ (``arg_groups/parallel_hook.py handle_deprecated_dp_attention``, 0.5.23 l.39-61): ``--attn-dp-size``
  names the groups and ``--dp-size`` counts replicas again; the old spelling is moved across first
  (``attn_dp_size = dp_size``, ``dp_size = 1``) when ``--attn-dp-size`` is 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.inputs.engine_args import ResolvedArgs

#: ``--attn-dp-size`` and ``handle_deprecated_dp_attention`` (``arg_groups/parallel_hook.py``)
ATTN_DP_SIZE_SINCE = Version("0.5.22")


@dataclass(frozen=True)
class DpLayout:
    """What a line's parallel flags make: ``replicas`` independent TP x PP groups, each cut into
    ``attention_dp`` attention-DP groups of ``tp // attention_dp`` ranks."""

    replicas: int
    attention_dp: int
    #: how the line said it, for the findings ("" where no attention DP)
    spelling: str = ""


def _int(args: ResolvedArgs, *dests: str) -> int | None:
    for dest in dests:
        value = args.get(dest)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def dp_layout(args: ResolvedArgs, version: Version, *, dp: int) -> DpLayout:
    """The line's replicas and attention-DP groups as release ``version`` reads them (``dp``: the deployment's
    ``data_parallel_size``, which the line's ``--dp-size`` carries; used where the line was not parsed)."""
    dp_size = _int(args, "dp_size", "data_parallel_size") or dp
    enabled = bool(args.get("enable_dp_attention", False))
    if version >= ATTN_DP_SIZE_SINCE:
        attn = _int(args, "attn_dp_size") or 1
        if enabled and attn == 1:  # the deprecated spelling, moved across before anything reads the layout
            return DpLayout(1, dp_size, "--dp-size with --enable-dp-attention") if dp_size > 1 else DpLayout(1, 1)
        if attn > 1:
            return DpLayout(dp_size, attn, "--attn-dp-size")
        return DpLayout(dp_size, 1)
    if enabled and dp_size > 1:
        return DpLayout(1, dp_size, "--dp-size with --enable-dp-attention")
    return DpLayout(dp_size, 1)


def as_run(dep: Deployment, args: ResolvedArgs, version: Version) -> Deployment:
    """``dep`` with its replicas and attention-DP groups as SGLang ``version`` runs its line
    (``data_parallel_size``: replicas; ``attention_data_parallel_size``: the groups inside each TP group)."""
    lay = dp_layout(args, version, dp=dep.data_parallel_size)
    if (lay.replicas, lay.attention_dp) == (dep.data_parallel_size, dep.attention_data_parallel_size):
        return dep
    return replace(dep, data_parallel_size=lay.replicas, attention_data_parallel_size=lay.attention_dp)


def written_dp(dep: Deployment, given: frozenset[str] | set[str]) -> int:
    """The ``--dp-size`` a launch of ``dep`` (as run) writes so that SGLang reads the same layout back: the
    groups times the replicas where the line spells attention DP the old way (``--enable-dp-attention``),
    the replicas where it names ``--attn-dp-size``."""
    if dep.attention_data_parallel_size > 1 and "--attn-dp-size" not in given:
        return dep.data_parallel_size * dep.attention_data_parallel_size
    return dep.data_parallel_size
