"""vLLM's refusals that read a package of the engine's environment (``engines/vllm/rules_image.py``): OpenTelemetry
for --otlp-traces-endpoint, FlashInfer for VLLM_ATTENTION_BACKEND=FLASHINFER, Ray for a world larger than the
visible GPUs. The environment is the nodes' probed packages where the engine runs there (``engine_here``), else
the release's wheel requirements; neither: not judged, said so."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace

import pytest
from packaging.version import Version
from vllm_line_cases import LineCase, layout, model_of

from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.knobs import Serving

OTEL = "vllm.image.otel"
FLASHINFER = "vllm.image.flashinfer_backend"
RAY = "vllm.image.ray"
HERE = Serving(engine_here=True)


@dataclass(frozen=True)
class ImageCase:
    """A line judged with the engine's environment: the nodes' probed ``packages`` and ``serving``."""

    case: LineCase
    packages: Mapping[str, str | None] = field(default_factory=dict)
    serving: Serving = HERE
    env: Mapping[str, str] = field(default_factory=dict)


def _devices(n: int, tp: int) -> object:
    return dc_replace(layout(tp=tp), devices=n)


ENDPOINT = "Qwen/Qwen3-8B --otlp-traces-endpoint http://otel:4317"
IMAGE_CASES = [
    # 0.8.0's wheel lists OpenTelemetry only under an extra: the probed environment decides
    ImageCase(LineCase(OTEL, "0.8.0", ENDPOINT, layout(), refused="OpenTelemetry is not available",
                       source="vllm/config.py:2832"), {"opentelemetry-sdk": None}),
    ImageCase(LineCase(OTEL, "0.8.0", ENDPOINT, layout()), {"opentelemetry-sdk": "1.26.0"}),
    ImageCase(LineCase(OTEL, "0.16.0", ENDPOINT, layout(), refused="Unable to configure 'otlp_traces_endpoint'",
                       source="vllm/config/observability.py:128"), {"opentelemetry-sdk": None}),
    # 0.17+ requires opentelemetry-sdk: an environment that says nothing has it
    ImageCase(LineCase(OTEL, "0.33.0", ENDPOINT, layout()), {}, Serving()),
    ImageCase(LineCase(FLASHINFER, "0.12.0", "", layout(), refused="flashinfer module was not found",
                       source="vllm/config/model.py:476"), {"flashinfer-python": None},
              env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"}),
    ImageCase(LineCase(FLASHINFER, "0.12.0", "", layout()), {"flashinfer-python": "0.4.1"},
              env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"}),
    ImageCase(LineCase(RAY, "0.11.0", "", _devices(1, 2), refused="Ray is required for multi-node inference",  # type: ignore[arg-type]
                       source="vllm/config/parallel.py:459"), {"ray": None}),
    ImageCase(LineCase(RAY, "0.11.0", "", _devices(1, 2)), {"ray": "2.49.0"}),  # type: ignore[arg-type]
    ImageCase(LineCase(RAY, "0.11.0", "", _devices(2, 2)), {"ray": None}),  # type: ignore[arg-type]
]


def _judge(item: ImageCase) -> tuple[list[object], tuple[str, ...]]:
    c = item.case
    version = Version(c.version)
    args = resolve(c.line.split(), version)
    assert args.ok, args.errors
    judged = config_check(args, model_of(c.model), c.layout, version, env=dict(item.env), serving=item.serving,
                          packages=item.packages)
    return [r for r in judged.refusals if r.rule == c.rule], judged.not_judged


@pytest.mark.parametrize("item", IMAGE_CASES, ids=lambda i: f"{i.case.rule}-{i.case.version}-"
                         f"{'refused' if i.case.refused else 'passes'}")
def test_image(item: ImageCase) -> None:
    mine, _ = _judge(item)
    c = item.case
    if c.refused is None:
        assert not mine
        return
    assert mine, "not refused"
    r = mine[0]
    text = r.text("vLLM")  # type: ignore[attr-defined]
    assert c.refused in text and f"{c.source}" in text, text
    assert r.exception == c.exception  # type: ignore[attr-defined]


def test_an_environment_nobody_says_is_not_judged() -> None:
    """0.16's wheel does not require OpenTelemetry and the deployment names only an image: not judged, and the
    note names the package and how to say it."""
    item = ImageCase(LineCase(OTEL, "0.16.0", ENDPOINT, layout()), {"opentelemetry-sdk": None},
                     Serving(image="example/vllm:0.16"))
    mine, notes = _judge(item)
    assert not mine
    assert any("opentelemetry-sdk" in n and "not judged" in n and "example/vllm:0.16" in n for n in notes), notes


def test_the_wheel_requirement_answers_for_ray() -> None:
    """0.11's wheel requires ray[cgraph]: with nothing probed, a world above the visible GPUs is not refused."""
    mine, notes = _judge(ImageCase(LineCase(RAY, "0.11.0", "", _devices(1, 2)), {}, Serving()))  # type: ignore[arg-type]
    assert not mine and not any("Ray" in n for n in notes)


def test_releases_without_the_entries_say_nothing() -> None:
    """0.20 holds no Ray entry (Ray is chosen elsewhere there): no refusal and no note, whatever the probe says."""
    mine, notes = _judge(ImageCase(LineCase(RAY, "0.20.0", "", _devices(1, 2)), {"ray": None}))  # type: ignore[arg-type]
    assert not mine and not any("Ray" in n for n in notes)
