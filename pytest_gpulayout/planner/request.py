"""What the user asked the planner for, as one value instead of ten loose parameters.

``plan()`` takes the engine settings and the users' demand as keyword arguments (its public
interface); every step after that (building the deployments, refusing layouts short of the demand,
searching a memory fraction, writing the measurement manifest) needs the same settings. Passing one
frozen ``PlanRequest`` keeps those steps' signatures short and makes it impossible for two of them
to see different settings. ``Demand`` is the users' need for the whole deployment, before the split
over DP replicas, so a refusal can read the same for every DP size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_gpulayout.deployment import Deployment, Require
from pytest_gpulayout.model.spec import ModelSpec


def per_replica(dp: int, concurrency: int | None, kv_tokens: int | None) -> Require:
    """The users' demand as each DP replica's requirement: replicas share the load evenly (round robin)."""
    return Require(
        kv_tokens=-(-kv_tokens // dp) if kv_tokens else None,
        concurrency=-(-concurrency // dp) if concurrency else None,
    )


def model_reference(model: ModelSpec) -> str:
    """What a manifest's ``model:`` would say for this spec (catalog id or config path)."""
    src = model.source
    if src.startswith("catalog:"):
        return src[len("catalog:") :]
    if src.endswith("config.json"):
        return str(Path(src).parent)
    return src or model.name


@dataclass(frozen=True)
class Demand:
    """What the users need from the whole deployment: ``concurrency`` full ``max_model_len`` requests
    at once and/or ``kv_tokens`` tokens of KV (None or 0: not given)."""

    concurrency: int | None = None
    kv_tokens: int | None = None

    @property
    def given(self) -> bool:
        """False when the user gave neither (the planner then assumes a need, ``Plan.assumed``)."""
        return bool(self.concurrency or self.kv_tokens)

    def per_replica(self, dp: int) -> Require:
        """Each of ``dp`` replicas' share of the demand (see ``per_replica``)."""
        return per_replica(dp, self.concurrency, self.kv_tokens)

    def describe(self, max_model_len: int | None) -> str | None:
        """The requirement in words (``Plan.required``); None when none was given."""
        if not self.given:
            return None
        parts = []
        if self.concurrency:
            parts.append(
                f"{self.concurrency} full-length requests at once"
                + (f" ({self.concurrency * max_model_len:,} tokens of KV)" if max_model_len else "")
            )
        if self.kv_tokens:
            parts.append(f"{self.kv_tokens:,} tokens of KV")
        return " and ".join(parts) + " in all, shared evenly by the DP replicas"


@dataclass(frozen=True)
class PlanRequest:
    """The settings every layout of one plan is checked with (``plan()``'s keyword arguments).

    ``model_ref`` is how the model is named in the deployments and in the measurement manifest
    (already resolved: ``model_reference`` when the caller gave none).
    """

    model_ref: str
    engine: str = "vllm"
    engine_version: str | None = None
    max_model_len: int | None = None
    demand: Demand = field(default_factory=Demand)
    max_gpus: int | None = None
    memory_fraction: float | None = None
    kv_cache_dtype: str = "auto"

    def deployment(self, tp: int, pp: int, dp: int, gpus: tuple[int, ...], share: int | None = None,
                   expert_parallel: bool = False) -> Deployment:
        """The deployment the checks evaluate for one layout on ``gpus``, with each replica's share
        (of ``share`` replicas, default ``dp``: an independent engine is a DP=1 deployment holding
        its share of the users of all the engines); ``expert_parallel``: the MoE layers' experts spread
        whole over the engine's EP ranks (``enable_expert_parallel``)."""
        name = f"tp{tp}-pp{pp}-dp{dp}" if share in (None, dp) else f"tp{tp}-pp{pp}-x{share}"
        return Deployment(
            name=name + ("-ep" if expert_parallel else ""),
            model=self.model_ref,
            engine=self.engine,
            tensor_parallel_size=tp,
            pipeline_parallel_size=pp,
            data_parallel_size=dp,
            gpus=gpus,
            max_model_len=self.max_model_len,
            memory_fraction=self.memory_fraction,
            kv_cache_dtype=self.kv_cache_dtype,
            engine_version=self.engine_version,
            require=self.demand.per_replica(dp if share is None else share),
            enable_expert_parallel=expert_parallel,
        )


__all__ = ["Demand", "PlanRequest", "model_reference", "per_replica"]
