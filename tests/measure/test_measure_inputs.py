"""The ``measure:`` block and everything checked before a launch: keys named rightly, a trace read
line by line and made into prompts of its stated lengths, a load longer than ``max_model_len``, a
missing tokenizer or Python, each one line naming the file and the key, within seconds."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulayout.cli import main
from pytest_gpulayout.deployment import Deployment, Launch
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.manifest.load import parse_manifest
from pytest_gpulayout.measure import run as run_mod
from pytest_gpulayout.measure.dataset import CHUNK, timed_trace_lines
from pytest_gpulayout.measure.preflight import check_inputs, context_length
from pytest_gpulayout.workload import Load, MeasureSpec, Slo, TraceRequest


def _manifest(tmp_path: Path, measure: Any, defaults: Any = None, **dep: Any) -> Any:
    data: dict[str, Any] = {"version": 1, "deployments": {"a": {"model": "Qwen/Qwen3-8B", "measure": measure, **dep}}}
    if defaults is not None:
        data["defaults"] = {"measure": defaults}
    return parse_manifest(data, path=tmp_path / "gpulayout.yaml")


def test_manifest_measure_block(tmp_path: Path) -> None:
    m = _manifest(tmp_path, {"concurrency": [16, 1], "slo": {"tpot_ms": 50}},
                  {"requests": 32, "slo": {"ttft_ms": 500}, "windows": 3, "launches": 3})
    spec = m.deployments[0].measure
    assert spec == MeasureSpec(concurrency=(1, 16), requests=32, windows=3, launches=3, slo=Slo(500.0, 50.0))
    assert spec.loads == (Load(concurrency=1), Load(concurrency=16))
    assert _manifest(tmp_path, {"duration_s": 30}, {"requests": 32}).deployments[0].measure.requests is None
    assert MeasureSpec().launches == 2   # two launches of each layout by default


def test_request_rate_is_a_key_of_its_own(tmp_path: Path) -> None:
    """``request_rate:`` was answered "did you mean 'requests'?": it is the open-loop sweep."""
    spec = _manifest(tmp_path, {"request_rate": [4, 1.5], "burstiness": 0.5}).deployments[0].measure
    assert spec.request_rate == (1.5, 4.0) and spec.burstiness == 0.5 and spec.concurrency == ()
    assert spec.loads == (Load(request_rate=1.5, burstiness=0.5), Load(request_rate=4.0, burstiness=0.5))
    both = _manifest(tmp_path, {"request_rate": 2, "concurrency": 4}).deployments[0].measure
    assert both.loads == (Load(concurrency=4), Load(request_rate=2.0))


@pytest.mark.parametrize("block, message", [
    ({"concurency": 8}, "deployments.a.measure.concurency: unknown key 'concurency': did you mean 'concurrency'?"),
    ({"rate": 2}, "deployments.a.measure.rate: unknown key 'rate': did you mean 'request_rate'?"),
    ({"qps": [1, 2]}, "did you mean 'request_rate'?"),
    ({"request_rates": 2}, "did you mean 'request_rate'?"),
    ({"num_launches": 3}, "did you mean 'launches'?"),
    ({"concurrency": 0}, "deployments.a.measure.concurrency"),
    ({"concurrency": []}, "deployments.a.measure.concurrency: is an empty list"),
    ({"request_rate": 0}, "deployments.a.measure.request_rate: must be a number of requests/s > 0"),
    ({"request_rate": [1, 1]}, "lists a request rate twice"),
    ({"burstiness": 0}, "deployments.a.measure.burstiness: must be a number > 0"),
    ({"slo": {"ttft": 5}}, "deployments.a.measure.slo.ttft: unknown key 'ttft': did you mean 'ttft_ms'?"),
    ({"slo": {"ttft_p99_ms": 5}}, "did you mean 'ttft_ms'? (each request within it, as vllm bench serve --goodput"),
    ({"slo": {"itl_p99_ms": 5}}, "did you mean 'tpot_ms'? (each request within it, as vllm bench serve --goodput "
                                 "counts); a bound on every inter-token gap is max_itl_ms"),
    ({"slo": {"tpot_p99_ms": 5}}, "did you mean 'tpot_ms'?"),
    ({"slo": {"attainment": 0.9}}, "deployments.a.measure.slo: sets only attainment"),
    ({"slo": {"ttft_ms": 5, "attainment": 90}}, "deployments.a.measure.slo.attainment: must be a fraction"),
    ({"requests": 5, "duration_s": 3}, "set requests or duration_s, not both"),
    ({"windows": 0}, "deployments.a.measure.windows"),
    ({"launches": 0}, "deployments.a.measure.launches"),
    ({"trace": "nope.jsonl"}, "deployments.a.measure.trace: no such file"),
    ("fast", "deployments.a.measure: must be a mapping"),
])
def test_manifest_measure_errors_name_the_key(tmp_path: Path, block: Any, message: str) -> None:
    with pytest.raises(InputError) as err:
        _manifest(tmp_path, block)
    assert message in str(err.value) and str(tmp_path) in str(err.value)


def _trace(tmp_path: Path, rows: list[object]) -> Path:
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_a_trace_is_read_at_load(tmp_path: Path) -> None:
    _trace(tmp_path, [{"input_length": 40, "output_length": 8, "timestamp": 10.0}, "",
                      {"input_length": 17, "output_length": 3, "timestamp": 10.5, "hash_ids": [1]}])
    spec = _manifest(tmp_path, {"trace": "requests.jsonl"}).deployments[0].measure
    assert spec.trace_requests == (TraceRequest(40, 8, 10.0), TraceRequest(17, 3, 10.5))
    assert spec.longest_request == 48


@pytest.mark.parametrize("rows, where, message", [
    (["{not json"], ":1", "not a JSON object"),
    ([{"input_length": 4, "output_length": 2, "timestamp": 0}, [1, 2]], ":2", "must be a JSON object"),
    ([{"input_length": 4, "timestamp": 0}], ":1", "missing output_length"),
    ([{"input_length": 0, "output_length": 2, "timestamp": 0}], ":1: input_length", "whole number of tokens >= 1"),
    ([{"input_length": 4, "output_length": 2.5, "timestamp": 0}], ":1: output_length", "not the number 2.5"),
    ([{"input_length": 4, "output_length": 2, "timestamp": -1}], ":1: timestamp", "seconds >= 0"),
    ([{"input_length": 4, "output_length": 2, "timestamp": 5}, {"input_length": 4, "output_length": 2, "timestamp": 1}],
     ":2: timestamp", "comes before the line above's 5"),
    ([""], "", "holds no request"),
])
def test_a_bad_trace_line_is_named(tmp_path: Path, rows: list[object], where: str, message: str) -> None:
    path = _trace(tmp_path, rows)
    with pytest.raises(InputError) as err:
        _manifest(tmp_path, {"trace": "requests.jsonl"})
    text = str(err.value)
    assert text.startswith(f"{path}{where}") and message in text
    assert "the trace named by" in text and "deployments.a.measure.trace" in text


def test_a_trace_and_a_request_rate_do_not_mix(tmp_path: Path) -> None:
    _trace(tmp_path, [{"input_length": 4, "output_length": 2, "timestamp": 0}])
    with pytest.raises(InputError, match="measure.request_rate: a trace sets its own arrivals"):
        _manifest(tmp_path, {"trace": "requests.jsonl", "request_rate": 2})


def test_trace_rows_become_prompts_of_their_lengths() -> None:
    """vLLM 0.32's timed_trace builds a prompt from the row's hash_ids, CHUNK tokens each, the last one cut
    to the length: without ids the prompt is empty (every request a 400). Each request gets ids of its
    own, enough for its input_length, and its arrival counted from the first."""
    rows = [TraceRequest(40, 8, 10.0), TraceRequest(16, 3, 10.5), TraceRequest(1, 1, 12.0)]
    out = [json.loads(x) for x in timed_trace_lines(rows)]
    assert [o["timestamp"] for o in out] == [0.0, 0.5, 2.0]
    assert [(o["input_length"], o["output_length"]) for o in out] == [(40, 8), (16, 3), (1, 1)]
    assert [len(o["hash_ids"]) for o in out] == [math.ceil(40 / CHUNK), 1, 1]
    ids = [i for o in out for i in o["hash_ids"]]
    assert len(ids) == len(set(ids))   # no two requests share a chunk: none is a cached prefix of another

    def expanded(ids: list[int], length: int) -> int:  # TimedTrace._expand_prompt's arithmetic
        total = 0
        for _ in ids:
            size = CHUNK if length >= CHUNK else length
            total += size
            length -= size
            if length <= 0:
                break
        return total

    assert [expanded(o["hash_ids"], o["input_length"]) for o in out] == [40, 16, 1]


def _dep(tmp_path: Path, spec: MeasureSpec, **kw: Any) -> Deployment:
    return Deployment(name="a", model="Qwen/Qwen3-8B", max_model_len=kw.pop("max_model_len", 512), measure=spec,
                      manifest_path=tmp_path / "gpulayout.yaml", base_dir=tmp_path, **kw)


def test_input_and_output_past_max_model_len_are_refused_before_a_launch(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        check_inputs([_dep(tmp_path, MeasureSpec(input_tokens=400, output_tokens=200))])
    assert str(err.value) == (f"{tmp_path / 'gpulayout.yaml'}: deployments.a.measure.output_tokens: input_tokens 400 + "
                              f"output_tokens 200 = 600 tokens a request, more than max_model_len 512: the engine "
                              f"would refuse every request (400 Bad Request); shorten them or raise max_model_len")
    check_inputs([_dep(tmp_path, MeasureSpec(input_tokens=300, output_tokens=212))])   # exactly 512: fits
    on_args = _dep(tmp_path, MeasureSpec(input_tokens=300, output_tokens=100), max_model_len=None,
                   launch=Launch(args=("--max-model-len=256",)))
    assert context_length(on_args) == (256, "--max-model-len 256 in launch.args")
    with pytest.raises(InputError, match="more than --max-model-len 256 in launch.args"):
        check_inputs([on_args])
    trace = MeasureSpec(trace=Path("t.jsonl"), trace_requests=(TraceRequest(10, 10, 0), TraceRequest(500, 20, 1)))
    with pytest.raises(InputError, match="measure.trace: request 2 of the trace t.jsonl holds 500 \\+ 20 = 520"):
        check_inputs([_dep(tmp_path, trace)])
    check_inputs([_dep(tmp_path, MeasureSpec(input_tokens=4000), max_model_len=None)])   # the engine's default


def test_a_missing_tokenizer_or_python_is_named_before_a_launch(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    dep = Deployment(name="a", model=str(model), measure=MeasureSpec(), manifest_path=tmp_path / "gpulayout.yaml",
                     base_dir=tmp_path)
    with pytest.raises(InputError, match=r"deployments\.a\.measure\.tokenizer: the model folder .* holds no tokenizer"):
        check_inputs([dep])
    (model / "tokenizer.json").write_text("{}")
    check_inputs([dep])
    with pytest.raises(InputError, match=r"measure\.tokenizer: no tokenizer folder at"):
        check_inputs([_dep(tmp_path, MeasureSpec(tokenizer=tmp_path / "none"))])
    with pytest.raises(InputError, match=r"deployments\.a\.measure\.python: no Python at /nowhere/python"):
        check_inputs([_dep(tmp_path, MeasureSpec(python="/nowhere/python"))])


def test_the_cli_refuses_a_bad_load_in_seconds_without_launching(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    launched: list[object] = []
    monkeypatch.setattr(run_mod, "launch", lambda *a, **k: launched.append(a))
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\ndeployments:\n  a:\n    model: Qwen/Qwen3-8B\n    max_model_len: 100\n"
        "    measure: {input_tokens: 90, output_tokens: 20}\n")
    t0 = time.monotonic()
    assert main(["measure", str(tmp_path / "gpulayout.yaml"), "--log-dir", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert "deployments.a.measure.output_tokens: input_tokens 90 + output_tokens 20 = 110 tokens" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert launched == [] and time.monotonic() - t0 < 10
