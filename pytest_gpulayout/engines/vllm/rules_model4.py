"""vLLM 0.10.0's ``--task`` against the model's class (``ModelConfig._resolve_runner``, config.py:935-990 in
0.10.0) and 0.8.4-0.10.0's Matryoshka ``normalize`` check of the pooler config, each judged in a frame of its own
(their entries read ``runner_option``, ``task_option``, ``supported_tasks`` and ``user_config`` / ``pooler_config``,
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

``ModelConfig._init_pooler_config`` (0.8.4-0.10.0, config.py:571-597 in 0.8.4, 793-819 in 0.10.0): on the pooling
runner, ``--override-pooler-config`` ``normalize`` false on a Matryoshka model (``matryoshka_dimensions`` in the
config, or ``is_matryoshka``; ``--hf-overrides`` sets top-level keys of ``hf_config``). The Sentence Transformers
pooling config the release reads from the repository fills only the keys the user left unset, so a given
``normalize`` stands. ``is_matryoshka`` is ``hasattr`` up to 0.9.2 (a key present, whatever its value) and
``bool(getattr(...))`` in 0.10.0. The runner is known only with ``--task``: a pooling task (``embed``, ``embedding``,
``classify``, ``score``, ``reward``) gives the pooling runner (every class supports them there, above; 0.10.0's
refusal of ``embed`` / ``reward`` on a classify architecture comes first and is said alone), ``generate`` /
``transcription`` another; with ``--task auto`` the runner is the class's (not among the facts before 0.9.2) or the
repository's Sentence Transformers files: the entry is not judged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.engines.vllm.interfaces import model_class
from pytest_gpulayout.refusals import Judged

RUNNER_TASK = "vllm.model.runner_task_unsupported"

MATRYOSHKA_NORMALIZE = "vllm.pooler.matryoshka_normalize"

RULES: Mapping[str, str] = {
    MATRYOSHKA_NORMALIZE: "--override-pooler-config normalize false on a Matryoshka model on the pooling runner "
                          "(ModelConfig._init_pooler_config, 0.8.4-0.10.0)",
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
    cls = model_class(ask.model, ask.version)
    if cls is None or cls.flag("supports_transcription"):
        return None
    return cls.architecture, cls.flag("is_pooling_model")


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


#: ``_init_pooler_config``'s Matryoshka check: 0.8.4 (config.py:586-593) to 0.10.0 (config.py:808-815)
NORMALIZE_SINCE = Version("0.8.4")
NORMALIZE_UNTIL = Version("0.10.1")
#: ``is_matryoshka`` is ``bool(getattr(hf_config, "matryoshka_dimensions", None))`` from 0.10.0 (config.py:1572-1574)
MATRYOSHKA_TRUTHY_SINCE = Version("0.10.0")
POOLING_TASKS = frozenset({"embed", "embedding", "classify", "score", "reward"})
NORMALIZE_NAMES = ("self.runner_type", "self.is_matryoshka", "user_config.normalize", "pooler_config.normalize")


def _mapping(value: object) -> Mapping[str, object] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, Mapping) else None


def is_matryoshka(ask: Ask) -> bool | None:
    """``ModelConfig.is_matryoshka`` of the model's config with ``--hf-overrides``' top-level keys; None where the
    config is not here."""
    if not ask.model.config_json:
        return None
    cfg = json.loads(ask.model.config_json)
    if not isinstance(cfg, Mapping):
        return None
    config = {**cfg, **(_mapping(ask.args.get("hf_overrides")) or {})}
    if ask.version >= MATRYOSHKA_TRUTHY_SINCE:
        dims = bool(config.get("matryoshka_dimensions"))
    else:
        dims = "matryoshka_dimensions" in config
    return dims or bool(config.get("is_matryoshka", False))


def normalize_frame(ask: Ask, task_refused: bool) -> dict[str, object] | None:
    """``_init_pooler_config``'s names (see the module docstring); None where ``--override-pooler-config`` gives
    no ``normalize`` (the check cannot refuse) or 0.10.0's task check refuses first; without the runner where
    ``--task`` does not say it."""
    if not NORMALIZE_SINCE <= ask.version < NORMALIZE_UNTIL or task_refused:
        return None
    given = _mapping(ask.args.get("override_pooler_config"))
    if given is None or given.get("normalize") is None:
        return None
    out: dict[str, object] = {"user_config.normalize": given["normalize"],
                              "pooler_config.normalize": given["normalize"]}
    matryoshka = is_matryoshka(ask)
    if matryoshka is not None:
        out["self.is_matryoshka"] = matryoshka
    task = str(ask.args.get("task") or "auto")
    if task != "auto":
        out["self.runner_type"] = "pooling" if task in POOLING_TASKS else "generate"
    return out


def _one(ask: Ask, rule: str, frame: Mapping[str, object] | None, names: Sequence[str]) -> Judged:
    """``rule`` judged in ``frame`` over the shared namespace less ``names`` the frame leaves out."""
    if frame is None or not ask.among([rule]):
        return Judged()
    base = {k: v for k, v in ask.values.items() if k not in names}
    return ask.book.judge(ask.version, {**base, **frame}, rules=[rule])


def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each in its frame."""
    task = _one(ask, RUNNER_TASK, runner_task_frame(ask), NAMES)
    normalize = _one(ask, MATRYOSHKA_NORMALIZE, normalize_frame(ask, bool(task.refusals)), NORMALIZE_NAMES)
    return combine([task, normalize])
