"""vLLM 0.10.0's ``--task`` against the model's class (``ModelConfig._resolve_runner``, config.py:935-990 in
0.10.0), judged in a frame of its own (its entries read ``runner_option``, ``task_option`` and ``supported_tasks``,
names no other rule gives).

0.10.0 is the one release of ``_resolve_runner``: ``__post_init__`` first rewrites ``--task score`` to ``classify``
(a classify architecture: a name ending in ``ForSequenceClassification`` or a cross-encoder class) or ``embed``,
and ``embedding`` to ``embed`` (config.py:562-572), then asks ``_get_supported_tasks`` (config.py:870-923):

- a classify architecture: ``{"generate": [], "pooling": ["classify"], "draft": []}``;
- otherwise ``generate`` holds ``generate`` where the class is a text-generation model (``compute_logits``, own or
  inherited), ``pooling`` holds ``encode`` and the task given where it is a pooling task (``is_pooling_model`` is
  True for every registered class: "Can convert any model into a pooling model", model_executor/models/
  registry.py:305), ``draft`` holds ``draft``.

0.10.0 gives ``ModelConfig.runner`` no flag (``EngineArgs.create_model_config`` passes none, engine/arg_utils.py:872):
the served model's ``runner_option`` is ``auto``, so its raise on an explicit runner is not reached (only the draft's
``ModelConfig``, ``runner="draft"``, config.py:2805-2807, whose checkpoint is not read). With ``--task`` the loop
over the supported tasks refuses a task no runner lists: ``generate`` / ``transcription`` on a class with no
``compute_logits``, ``embed`` / ``reward`` on a classify architecture (whose pooling tasks are ``["classify"]``).

The interface facts flag the pooling classes (``releases/0.10.0.json``, ``interfaces.by_flag.is_pooling_model``);
four of them inherit ``compute_logits`` from a generative class and are text-generation models too (GritLM,
gritlm.py:218; InternLM2ForRewardModel, internlm2.py:404; JambaForSequenceClassification, jamba.py:563;
JinaVLForRanking, jina_vl.py:70), and the transcription classes add ``transcription`` to the generation tasks (or
are transcription only): for these, for an architecture the facts do not know and under ``--model-impl
transformers`` the entries are not judged. ``--task draft`` on a classify architecture finds no runner in
``_RUNNER_TASKS`` (``next`` raises ``StopIteration``, not this message): not judged.

The release prints ``supported_runner_types``, a set, in its process's hash order; it is shown here sorted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.generation import release_facts
from pytest_gpulayout.refusals import Judged

RUNNER_TASK = "vllm.model.runner_task_unsupported"

RULES: Mapping[str, str] = {
    RUNNER_TASK: "--task generate / transcription on a class with no compute_logits, or --task embed / reward on a "
                 "classify architecture (ModelConfig._resolve_runner, 0.10.0)",
}

#: the one release of ``_resolve_runner``
RESOLVE_RUNNER = Version("0.10.0")
#: ``_RUNNER_TASKS`` (config.py:104-108 in 0.10.0)
RUNNER_TASKS: Mapping[str, tuple[str, ...]] = {
    "generate": ("generate", "transcription"),
    "pooling": ("encode", "embed", "classify", "reward"),
    "draft": (),
}
#: pooling-flagged classes that inherit ``compute_logits`` (text-generation models too) in 0.10.0
GENERATIVE_POOLING = frozenset({"GritLM", "InternLM2ForRewardModel", "JambaForSequenceClassification",
                                "JinaVLForRanking"})
#: the names ``_resolve_runner`` reads (removed from the shared namespace where the frame leaves them out)
NAMES = ("runner_option", "task_option", "supported_runner_types", "task_runner", "supported_tasks[task_runner]",
         "after for (runner, runner_tasks) in supported_tasks.items()")


class ShownSet(frozenset[str]):
    """A set of names printed as a Python set literal, sorted (the release's order is its hash order)."""

    def __str__(self) -> str:
        return "{" + ", ".join(repr(n) for n in sorted(self)) + "}"

    __repr__ = __str__


def _architecture(ask: Ask) -> tuple[str, bool] | None:
    """The class the registry resolves (the first architecture the 0.10.0 facts know) and whether it is a
    pooling-flagged one; None where none is known or under ``--model-impl transformers``."""
    if ask.args.get("model_impl", "auto") == "transformers":
        return None
    facts = release_facts("vllm", ask.version, group="interfaces")
    if facts is None:
        return None
    interfaces = facts.data["interfaces"]
    by_flag = {name: set(archs) for name, archs in interfaces["by_flag"].items()}
    known = set().union(*by_flag.values()) | set(interfaces.get("without_flags", ()))
    for arch in ask.model.architectures:
        if arch in known:
            if arch in by_flag.get("supports_transcription", set()):
                return None
            return arch, arch in by_flag.get("is_pooling_model", set())
    return None


def supported_tasks(classify: bool, generative: bool, task: str) -> dict[str, list[str]]:
    """``_get_supported_tasks(task)`` (config.py:870-923 in 0.10.0) for a class that is no transcription one;
    under ``--task auto`` the preferred pooling task is not resolved (never printed: the message needs a task)."""
    if classify:
        return {"generate": [], "pooling": ["classify"], "draft": []}
    pooling = ["encode"] + ([task] if task in RUNNER_TASKS["pooling"] else [])
    return {"generate": ["generate"] if generative else [], "pooling": pooling, "draft": ["draft"]}


def runner_task_frame(ask: Ask) -> dict[str, object] | None:
    """``_resolve_runner``'s names (see the module docstring); None without ``--task`` or where the release is not
    0.10.0; without the class's names where the class is not resolved (the entries are not judged)."""
    if ask.version != RESOLVE_RUNNER:
        return None
    runner = "auto"  # ModelConfig.runner's default: no flag sets it in 0.10.0
    task = str(ask.args.get("task") or "auto")
    if task == "auto":
        return None
    resolved = _architecture(ask)
    if resolved is None or resolved[0] in GENERATIVE_POOLING:
        return {}
    arch, pooling_class = resolved
    classify = any(a.endswith("ForSequenceClassification") for a in ask.model.architectures) \
        or arch.endswith("ForSequenceClassification")
    if task == "score":
        task = "classify" if classify else "embed"
    elif task == "embedding":
        task = "embed"
    tasks = supported_tasks(classify, not pooling_class, task)
    out: dict[str, object] = {
        "runner_option": runner, "task_option": task,
        "supported_runner_types": ShownSet(r for r, listed in tasks.items() if listed),
        # the loop is reached only with --runner auto (an explicit runner returns first) and ends without a return
        "after for (runner, runner_tasks) in supported_tasks.items()":
            runner == "auto" and not any(task in listed for listed in tasks.values()),
    }
    task_runner = next((r for r, listed in RUNNER_TASKS.items() if task in listed), None)
    if task_runner is not None:
        out["task_runner"] = task_runner
        out["supported_tasks[task_runner]"] = tasks[task_runner]
    elif out["after for (runner, runner_tasks) in supported_tasks.items()"]:
        # --task draft on a classify architecture: StopIteration, not this message
        del out["after for (runner, runner_tasks) in supported_tasks.items()"]
    return out


def _one(ask: Ask, rule: str, frame: Mapping[str, object] | None, names: Sequence[str]) -> Judged:
    """``rule`` judged in ``frame`` over the shared namespace less ``names`` the frame leaves out."""
    if frame is None or not ask.among([rule]):
        return Judged()
    base = {k: v for k, v in ask.values.items() if k not in names}
    return ask.book.judge(ask.version, {**base, **frame}, rules=[rule])


def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each in its frame."""
    return _one(ask, RUNNER_TASK, runner_task_frame(ask), NAMES)
