"""A vLLM command line judged by the release's config-time rules: one case per line, refused or accepted, through
the release's own parser (``engines/vllm/cli.resolve``), as test_vllm_config_checks_modes.py and
test_vllm_config_checks_launch.py state them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Layout

H100 = (9, 0)
B200 = (10, 0)


def layout(tp: int = 1, pp: int = 1, dp: int = 1, cc: tuple[int, int] = H100) -> Layout:
    return Layout(tp, pp, dp, cc, "NVIDIA H100 80GB HBM3", 81559)


def model_of(name: str) -> ModelSpec:
    return load_model({"dense": "Qwen/Qwen3-8B", "moe": "Qwen/Qwen3-30B-A3B"}[name])


@dataclass(frozen=True)
class LineCase:
    rule: str
    version: str
    line: str
    layout: Layout
    model: str = "dense"
    refused: str | None = None       # the release's words (a part); None: the rule refuses nothing
    source: str | None = None        # file:line in that release
    exception: str = "ValueError"


def case_id(c: LineCase) -> str:
    return f"{c.rule.removeprefix('vllm.')}-{c.version}-{'refused' if c.refused is not None else 'passes'}"


@dataclass(frozen=True)
class EnvCase:
    """A line judged with the launch's environment variables (an ``ENV_CASES`` item, not a ``CASES`` one: the
    real-engine harness gives the release none)."""

    case: LineCase
    env: Mapping[str, str] | tuple[tuple[str, str], ...] = ()


def judge(case: LineCase, models: Callable[[str], ModelSpec] = model_of,
          env: Mapping[str, str] | tuple[tuple[str, str], ...] = ()) -> None:
    """The line parsed by ``case.version``'s parser and judged (with ``env``, the launch's variables): refused by
    ``case.rule`` in the release's words (its message, exception and file:line), or not refused by it at all.
    ``models``: the module's models by name."""
    version = Version(case.version)
    args = resolve(case.line.split(), version)
    assert args.ok, args.errors
    judged = config_check(args, models(case.model), case.layout, version, env=dict(env))
    mine = [r for r in judged.refusals if r.rule == case.rule]
    if case.refused is None:
        assert not mine, [r.text("vLLM") for r in mine]
        return
    assert mine, (judged.refusals, judged.not_judged)
    r = mine[0]
    assert case.refused in r.message
    assert r.exception == case.exception
    if case.source:
        assert r.source == case.source
    assert r.text("vLLM").startswith(f"vLLM {case.version} raises {case.exception}")
