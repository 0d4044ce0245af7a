"""Engine invocations in what an artifact runs: ``vllm serve``, ``python -m vllm.entrypoints.openai.api_server``,
``python -m sglang.launch_server`` / ``sglang serve``, ``llama-server``, ``trtllm-serve serve``. The shell text and
exec-form command lines are read by ``inputs/shell.py`` (quotes across lines, heredocs, ``&&`` / ``;`` / ``|`` /
``&``, ``sh -c``, variables, launchers such as ``srun``, ``torchrun``, ``docker run IMAGE``); this module says
which of the commands found run an engine, and with which arguments."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from packaging.version import Version

from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.inputs.shell import Command, Files, Script, read_argv, read_script

_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: a command whose bare form serves (``trtllm-serve MODEL``) but whose other subcommands do not start that server:
#: TensorRT-LLM's ``DefaultGroup`` (``tensorrt_llm/commands/serve.py``) takes any first word but these as ``serve``
_OTHER_SUBCOMMANDS = {"trtllm-serve": frozenset({"serve", "grpc", "disaggregated", "disaggregated_mpi_worker",
                                                 "mm_embedding_serve", "--help", "-h"})}
_PYTHON = re.compile(r"(^|/)python[0-9.]*$")


@dataclass(frozen=True)
class Invocation:
    """One engine command found in an artifact."""

    engine: str                      # vllm | sglang | llamacpp
    args: tuple[str, ...]            # what follows the entry point
    entry: str                       # the entry point as written (``vllm serve``)
    source: str                      # where it stands: ``serve.sh:12``, ``Deployment/x/container``
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: the container image it runs in (``""``: none said, a bare command line)
    image: str = ""
    #: ``$VAR`` / ``$(...)`` in its words that neither the script nor its environment gives (their text is kept)
    unknown: tuple[str, ...] = ()
    #: where the engine's arguments are fields, not words (Ray Serve LLM's ``engine_kwargs``): how the release
    #: of a version reads them (``artifacts/rayserve.py``), and what hands them to the engine (``via``)
    fields: Callable[[Version | None], ResolvedArgs] | None = None
    via: str = ""


def match(argv: Sequence[str]) -> tuple[str, str, int] | None:
    """``(engine, entry as written, index where its arguments start)`` when ``argv`` runs an engine."""
    i = 0
    while i < len(argv) and _ENV.match(argv[i]):
        i += 1
    if i >= len(argv):
        return None
    head = argv[i].rsplit("/", 1)[-1]
    nxt = argv[i + 1] if i + 1 < len(argv) else ""
    for engine in ENGINES.values():  # each engine names its own entry points
        for words in engine.cli.entry_commands:
            if head == words[0] and (len(words) == 1 or nxt == words[1]):
                if len(words) == 1 and nxt in _OTHER_SUBCOMMANDS.get(head, ()):
                    continue
                return engine.name, " ".join((head, *words[1:])), i + len(words)
    if _PYTHON.search(argv[i]) or head in ("uv", "python", "python3"):
        rest = list(argv[i + 1:])
        if head == "uv" and rest[:1] == ["run"]:
            return match(rest[1:]) if rest[1:] else None
        for j, a in enumerate(rest[:-1]):
            if a == "-m":
                module = rest[j + 1]
                for engine in ENGINES.values():
                    if module in engine.cli.entry_modules:
                        return engine.name, f"python -m {module}", i + j + 3
                return None
    return None


def image_entry(image: str) -> tuple[str, ...] | None:
    """The entry point of an engine's own image (``vllm/vllm-openai:v0.8.5`` runs ``vllm serve``), or None."""
    image = image.removeprefix("docker.io/")
    for engine in ENGINES.values():  # each engine names its own images
        for name in engine.cli.entry_images:
            if image == name or image.startswith((name + ":", name + "-", name + "@")):
                if engine.cli.entry_commands:
                    return engine.cli.entry_commands[0]
                return ("python3", "-m", engine.cli.entry_modules[0])
    return None


def image_release(image: str) -> tuple[str, str | None] | None:
    """``(engine, release)`` when ``image`` is one of an engine's release images (``Engine.release_tags``);
    the release is None where its tag names none (``latest``, ``nightly``, no tag, a digest only). None: not
    an engine's release image. The image's own references spell it: ``docker.io/`` and a registry mirror's
    host are dropped, a digest after ``@`` names no release."""
    ref = image.strip().removeprefix("docker.io/").split("@", 1)[0]
    repo, tag = ref, ""
    if ":" in ref.rsplit("/", 1)[-1]:
        repo, _, tag = ref.rpartition(":")
    for engine in ENGINES.values():  # each engine names its own images
        for name, pattern in engine.cli.release_tags:
            if repo == name or repo.endswith("/" + name):  # a registry's mirror keeps the path and the tag
                m = re.fullmatch(pattern, tag) if tag else None
                return engine.name, m.group(1) if m else None
    return None


def _engine_words() -> re.Pattern[str]:
    words = {w for e in ENGINES.values() for cmd in e.cli.entry_commands for w in cmd[:1]}
    words |= {m.split(".", 1)[0] for e in ENGINES.values() for m in e.cli.entry_modules}
    return re.compile(r"\b(" + "|".join(sorted(map(re.escape, words))) + r")\b")


def _invocations(script: Script, where: str, *, lines: bool) -> list[Invocation]:
    """The engine invocations among a script's commands; a part the shell would refuse, where it names an
    engine, is an ``InputError`` naming its line (elsewhere it is no engine's business)."""
    engines = _engine_words()
    for problem in script.problems:
        if engines.search(problem.text):
            at = f"{problem.file}:{problem.line}" if problem.file else f"{where}:{problem.line}" if lines else where
            raise InputError(f"the shell cannot read this: {problem.text.splitlines()[0].split(': ', 1)[-1]}"
                             f" ({problem.text.split(':', 1)[0]})", where=at)
    out: list[Invocation] = []
    for c in script.commands:
        inv = _invocation(c, f"{c.file}:{c.line}" if c.file else f"{where}:{c.line}" if lines else where)
        if inv is not None:
            out.append(inv)
    return out


#: first words after an engine's image that are a program run in its place, not the entry point's first argument
_PROGRAMS = frozenset({"sh", "bash", "dash", "zsh", "env", "exec", "python", "python3", "uv"})


def _entry_takes(argv: Sequence[str]) -> bool:
    """Whether ``docker run IMAGE ARGS`` hands ARGS to the image's entry point: Docker appends them to its
    ENTRYPOINT, so a positional model (``vllm/vllm-openai:v0.10.1 Qwen/Qwen2.5-7B-Instruct --max-model-len 1024``)
    is the entry point's first argument, as a flag is; an engine command or a shell there is run instead."""
    if not argv or argv[0].startswith("-"):
        return True
    return match(argv) is None and argv[0].rsplit("/", 1)[-1] not in _PROGRAMS


def _invocation(c: Command, source: str) -> Invocation | None:
    argv: Sequence[str] = c.argv
    served = image_entry(c.image) if c.image else None
    if served is not None and _entry_takes(argv):
        argv = [*served, *argv]
    found = match(argv)
    if found is None:
        return None
    engine, entry, start = found
    prefix: dict[str, str] = {}
    for word in argv[:start]:  # VAR=x words before the engine in an exec-form command
        if not _ENV.match(word):
            break
        name, _, value = word.partition("=")
        prefix[name] = value
    return Invocation(engine, tuple(argv[start:]), entry, source, MappingProxyType({**c.env, **prefix}), c.image,
                      c.unknown)


def find_in_argv(argv: Sequence[str], source: str, env: Mapping[str, str] | None = None,
                 image: str = "", files: Files | None = None) -> list[Invocation]:
    """Engine invocations in one argument vector (an exec-form command: a container's ``command`` + ``args``),
    launchers unwrapped and ``sh -c "..."`` read as shell text. A container of an engine's own image whose
    arguments start with a flag (or that has none) runs that image's entry point."""
    env = dict(env or {})
    served = image_entry(image) if image else None
    if served is not None and (not argv or argv[0].startswith("-")):
        argv = [*served, *argv]
    try:
        script = read_argv(list(argv), env, files=files)
    except InputError as err:  # the shell grammar is not installed
        raise InputError(err.message, where=source) from None
    return [Invocation(i.engine, i.args, i.entry, i.source, i.env, i.image or image, i.unknown)
            for i in _invocations(script, source, lines=False)]


def find_in_text(text: str, where: str, env: Mapping[str, str] | None = None,
                 files: Files | None = None) -> list[Invocation]:
    """Every engine invocation in shell text, each named ``where:LINE`` (the line its first word stands on; a
    script it runs or sources, ``files``, by that script's name and line); ``env``: the environment the text runs
    with (a container's)."""
    try:
        script = read_script(text, env, files=files)
    except InputError as err:  # the shell grammar is not installed
        raise InputError(err.message, where=where) from None
    return _invocations(script, where, lines=True)
