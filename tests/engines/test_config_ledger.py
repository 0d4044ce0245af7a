"""The ledger of config-time refusals (``engines/<engine>/config_ledger.json``, written by ``tools/config_ledger.py``
from the released wheels) and its hand-kept classification (``config_classes.yaml``): every refusal listed is
answered (a rule with a test, unreachable with why, or open with why), every item of the classification
answers something, and every rule it names is one the engine's ``config_checks.py`` has.

``GPULAYOUT_WHEELS_SRC`` (a folder of unpacked wheels, ``vllm-<version>/`` and ``sglang-<version>/``) makes
``test_the_ledger_is_current`` re-list them and compare; without it that test is skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import zipfile
from collections import Counter
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from builders import dep
from packaging.version import Version

from pytest_gpulayout.engines.sglang import config_checks as sglang_checks
from pytest_gpulayout.engines.vllm import config_checks as vllm_checks
from pytest_gpulayout.machine.facts import Gpu
from pytest_gpulayout.refusals import Layout, Verdict, load_ledger, parse_classes

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "config_ledger.py"
ENGINES = {"vllm": vllm_checks.RULES, "sglang": sglang_checks.RULES}
RANGES = {"vllm": ("0.8.0", "0.33.0"), "sglang": ("0.4.6", "0.5.23")}


@cache
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_ledger", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _path(engine: str, name: str) -> Path:
    return REPO / "pytest_gpulayout" / "engines" / engine / name


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_listed_refusal_is_answered(engine: str) -> None:
    ledger = load_ledger(engine)
    unanswered = [f"{e.file} {e.function}: {e.template[:80]!r}" for e in ledger.entries if ledger.classify(e) is None]
    assert not unanswered, f"{len(unanswered)} refusals without a classification, first: {unanswered[:5]}"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_item_of_the_classification_answers_a_refusal(engine: str) -> None:
    ledger = load_ledger(engine)
    used = Counter(p.index for e in ledger.entries if (p := ledger.pattern_of(e)) is not None)
    dead = [p.index + 1 for p in ledger.patterns if p.index not in used]
    assert not dead, f"items {dead} of {engine}'s config_classes.yaml match no refusal"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_rules_named_are_the_engines_rules(engine: str) -> None:
    """A ``rule:`` names a rule of ``config_checks.RULES`` (each tested in ``test_<engine>_config_checks.py``),
    and every rule there decides at least one listed refusal."""
    ledger = load_ledger(engine)
    named = {p.classification.detail for p in ledger.patterns if p.classification.verdict is Verdict.RULE}
    assert named == set(ENGINES[engine])
    assert set(ledger.by_rule) == set(ENGINES[engine])


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_answer_says_why(engine: str) -> None:
    for p in load_ledger(engine).patterns:
        assert len(p.classification.detail) > 8, p


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_ledger_is_what_the_tool_writes(engine: str) -> None:
    text = _path(engine, "config_ledger.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert tool().dump(data) == text
    assert data["extracted_by"] == "tools/config_ledger.py" and data["engine"] == engine
    releases = [Version(r) for r in data["releases"]]
    assert releases == sorted(releases)
    first, last = RANGES[engine]
    assert (str(releases[0]), str(releases[-1])) == (first, last)
    assert set(data["wheels"]) == set(data["releases"])
    listed = set(data["releases"])
    for e in data["entries"]:
        for a, b, line in e["at"]:
            assert a in listed and b in listed and Version(a) <= Version(b) and line > 0


def test_the_counts_per_engine() -> None:
    """What the report gives: the refusals listed, and how they are answered."""
    for engine in ENGINES:
        ledger = load_ledger(engine)
        counts = Counter(c.verdict for e in ledger.entries if (c := ledger.classify(e)) is not None)
        assert sum(counts.values()) == len(ledger.entries)
        assert counts[Verdict.RULE] >= len(ENGINES[engine])


def test_vllm_033_lines_read_by_hand() -> None:
    """vllm 0.33.0 ``config/scheduler.py``: ``if self.max_num_batched_tokens < self.max_num_seqs:`` at 331, its
    raise at 332; ``config/parallel.py`` ``raise ValueError("enable_expert_parallel must be True to use
    EPLB.")`` at 570."""
    ledger = load_ledger("vllm")
    v = Version("0.33.0")
    (seqs,) = [e for e in ledger.held("vllm.scheduler.batched_below_seqs", v)]
    assert (seqs.file, seqs.function, seqs.line_in(v)) == (
        "vllm/config/scheduler.py", "SchedulerConfig.verify_max_model_len", 332)
    assert seqs.conditions == ("self.max_num_batched_tokens < self.max_num_seqs",)
    assert seqs.template == ("max_num_batched_tokens ({self.max_num_batched_tokens}) must be greater than or equal "
                             "to max_num_seqs ({self.max_num_seqs}).")
    (eplb,) = ledger.held("vllm.parallel.eplb_needs_ep", v)
    assert (eplb.file, eplb.line_in(v)) == ("vllm/config/parallel.py", 570)


# -- the tool, on wheels made here ----------------------------------------------------------------------------

_CONFIG_V1 = '''
import sys
class SchedulerConfig:
    def _verify_args(self):
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= {{x}}")
        assert self.block_size > 0, "block_size must be positive"
        if self.bad:
            logger.error("bad flag %s", self.bad)
            sys.exit(1)
'''
_CONFIG_V2 = "\n\n" + _CONFIG_V1.replace("block_size > 0", "block_size >= 16")


def _wheel(tmp: Path, version: str, text: str) -> Path:
    path = tmp / f"vllm-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("vllm/config/scheduler.py", text)
        zf.writestr("vllm/other.py", "raise ValueError('not scanned')\n")
    return path


def test_the_tool_groups_identical_refusals_across_releases(tmp_path: Path) -> None:
    t = tool()
    sources = [t.Source(_wheel(tmp_path, v, text)) for v, text in
               (("1.0.0", _CONFIG_V1), ("1.1.0", _CONFIG_V2), ("1.2.0", _CONFIG_V2))]
    data = t.build("vllm", sources)
    assert data["releases"] == ["1.0.0", "1.1.0", "1.2.0"]
    by_kind = {(e["kind"], e["template"][:20]): e for e in data["entries"]}
    raise_ = by_kind[("raise", "max_num_batched_toke")]
    # the same refusal in three releases: one entry, its line moving by two in 1.1.0
    assert raise_["at"] == [["1.0.0", "1.0.0", 6], ["1.1.0", "1.2.0", 8]]
    assert raise_["conditions"] == ["self.max_num_batched_tokens < self.max_num_seqs"]
    assert raise_["template"] == "max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= {{x}}"
    assert raise_["function"] == "SchedulerConfig._verify_args" and raise_["exception"] == "ValueError"
    # an assert whose condition changed is a new refusal
    asserts = sorted((e["conditions"][-1], e["at"][0][0]) for e in data["entries"] if e["kind"] == "assert")
    assert asserts == [("not (self.block_size > 0)", "1.0.0"), ("not (self.block_size >= 16)", "1.1.0")]
    (exit_,) = [e for e in data["entries"] if e["kind"] == "exit"]
    assert exit_["template"] == "bad flag %s" and exit_["conditions"] == ["self.bad"]
    assert all(e["file"] == "vllm/config/scheduler.py" for e in data["entries"])


def test_an_unpacked_folder_lists_as_its_wheel(tmp_path: Path) -> None:
    t = tool()
    wheel = _wheel(tmp_path, "1.0.0", _CONFIG_V1)
    folder = tmp_path / "vllm-1.0.0"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(folder)
    (folder / ".wheel").write_text(wheel.name + "\n")
    (folder / ".complete").write_text("")
    from_zip = t.build("vllm", [t.Source(wheel)])
    from_folder = t.build("vllm", [t.Source(folder)])
    assert from_zip == from_folder


@pytest.mark.skipif(not os.environ.get("GPULAYOUT_WHEELS_SRC"), reason="set GPULAYOUT_WHEELS_SRC to unpacked wheels")
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_ledger_is_current(engine: str) -> None:
    root = Path(os.environ["GPULAYOUT_WHEELS_SRC"])
    folders = sorted(p for p in root.glob(f"{engine}-*") if (p / ".complete").exists())
    data = tool().build(engine, [tool().Source(p) for p in folders])
    assert tool().dump(data) == _path(engine, "config_ledger.json").read_text(encoding="utf-8")


def test_a_malformed_classification_names_the_item() -> None:
    with pytest.raises(ValueError, match=r"config_classes.yaml: item 1: give exactly one of rule / unreachable / open"):
        parse_classes("- match: {file: x}\n  rule: a\n  open: b\n")
    with pytest.raises(ValueError, match=r"item 1: unknown key 'fil'"):
        parse_classes("- match: {fil: x}\n  open: b\n")


def test_a_layout_of_a_deployment_on_its_gpus() -> None:
    """What the rules read of the machine: the lowest capability (unknown when one GPU's is), the smallest GPU
    (its memory picks vLLM's default batch), the hosts."""
    gpus = [Gpu(index=0, uuid="a", name="NVIDIA H100 80GB HBM3", memory_total_mib=81559, compute_capability=(9, 0),
                host="n1"),
            Gpu(index=1, uuid="b", name="NVIDIA A100-SXM4-40GB", memory_total_mib=40960, compute_capability=(8, 0),
                host="n2")]
    layout = Layout.of(dep("d", tp=2), gpus)
    assert (layout.tensor_parallel_size, layout.compute_capability, layout.gpu_name, layout.gpu_total_mib,
            layout.nodes) == (2, (8, 0), "NVIDIA A100-SXM4-40GB", 40960, 2)
    unknown = Layout.of(dep("d", tp=2), [gpus[0], Gpu(index=1, uuid="c", name="?", memory_total_mib=None)])
    assert unknown.compute_capability is None



def test_the_readme_states_the_ledger_counts() -> None:
    """README.md's counts of the ledger are the ledger's (the block ``tools/readme_counts.py`` writes)."""
    spec = importlib.util.spec_from_file_location("readme_counts", REPO / "tools" / "readme_counts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    said = readme[readme.index(module.START) + len(module.START):readme.index(module.END)]
    assert said == module.block(), "README.md's ledger counts are stale: run python tools/readme_counts.py"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_rule_decides_some_listed_refusal(engine: str) -> None:
    """A rule of ``config_checks.RULES`` that no ledger entry is classified under decides nothing: its entries went
    to an earlier item of the classification (the same refusal built twice, by two rule areas), or it has none."""
    ledger = load_ledger(engine)
    idle = sorted(rule for rule in ENGINES[engine] if not ledger.rule_entries(rule))
    assert not idle, f"rules without a listed refusal: {idle}"
