"""Engine invocations in shell text: ``vllm serve``, ``python -m vllm.entrypoints.openai.api_server``,
``python -m sglang.launch_server`` / ``sglang serve``, ``llama-server``; with line continuations, ``sh -c``
strings, ``VAR=value`` prefixes, ``env``/``exec`` and ``&&`` / ``;`` / ``|`` between commands (``shlex``)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.errors import InputError

_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "{", "}", "\n"}
_PYTHON = re.compile(r"(^|/)python[0-9.]*$")
_WRAPPERS = {"exec", "env", "nohup", "time", "sudo", "stdbuf", "nice", "numactl", "taskset", "srun"}


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


def match(argv: Sequence[str]) -> tuple[str, str, int] | None:
    """``(engine, entry as written, index where its arguments start)`` when ``argv`` runs an engine."""
    i = 0
    while i < len(argv) and (argv[i] in _WRAPPERS or _ENV.match(argv[i]) or (i and argv[i - 1] == "numactl"
                                                                             and argv[i].startswith("-"))):
        i += 1
    if i >= len(argv):
        return None
    head = argv[i].rsplit("/", 1)[-1]
    nxt = argv[i + 1] if i + 1 < len(argv) else ""
    for engine in ENGINES.values():  # each engine names its own entry points
        for words in engine.entry_commands:
            if head == words[0] and (len(words) == 1 or nxt == words[1]):
                return engine.name, " ".join((head, *words[1:])), i + len(words)
    if _PYTHON.search(argv[i]) or head in ("uv", "python", "python3"):
        rest = list(argv[i + 1:])
        if head == "uv" and rest[:1] == ["run"]:
            return match(rest[1:]) if rest[1:] else None
        for j, a in enumerate(rest[:-1]):
            if a == "-m":
                module = rest[j + 1]
                for engine in ENGINES.values():
                    if module in engine.entry_modules:
                        return engine.name, f"python -m {module}", i + j + 3
                return None
    return None


def _commands(tokens: Sequence[str]) -> Iterator[list[str]]:
    cmd: list[str] = []
    for t in tokens:
        if t in _SEPARATORS or (t and set(t) <= set(";&|()")):
            if cmd:
                yield cmd
            cmd = []
        else:
            cmd.append(t)
    if cmd:
        yield cmd


def image_entry(image: str) -> tuple[str, ...] | None:
    """The entry point of an engine's own image (``vllm/vllm-openai:v0.8.5`` runs ``vllm serve``), or None."""
    image = image.removeprefix("docker.io/")
    for engine in ENGINES.values():  # each engine names its own images
        for name in engine.entry_images:
            if image == name or image.startswith((name + ":", name + "-", name + "@")):
                if engine.entry_commands:
                    return engine.entry_commands[0]
                return ("python3", "-m", engine.entry_modules[0])
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
        for name, pattern in engine.release_tags:
            if repo == name or repo.endswith("/" + name):  # a registry's mirror keeps the path and the tag
                m = re.fullmatch(pattern, tag) if tag else None
                return engine.name, m.group(1) if m else None
    return None


def find_in_argv(argv: Sequence[str], source: str, env: Mapping[str, str] | None = None,
                 image: str = "") -> list[Invocation]:
    """Engine invocations in one argument vector (``sh -c "..."`` is read as shell text). A container of an
    engine's own image whose arguments start with a flag (or that has none) runs that image's entry point."""
    env = dict(env or {})
    served = image_entry(image) if image else None
    if served is not None and (not argv or argv[0].startswith("-")):
        argv = [*served, *argv]
    out: list[Invocation] = []
    for j, a in enumerate(argv):
        if a == "-c" and j > 0 and argv[j - 1].rsplit("/", 1)[-1] in ("sh", "bash", "dash", "zsh") \
                and j + 1 < len(argv):
            return [Invocation(i.engine, i.args, i.entry, source, MappingProxyType({**env, **i.env}), image)
                    for i in find_in_text(argv[j + 1], source)]
    prefix_env = {}
    for a in argv:
        if _ENV.match(a):
            k, _, v = a.partition("=")
            prefix_env[k] = v
        elif a not in _WRAPPERS:
            break
    found = match(argv)
    if found is not None:
        engine, entry, start = found
        out.append(Invocation(engine, tuple(argv[start:]), entry, source, MappingProxyType({**env, **prefix_env}),
                              image))
    return out


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(first line number, line)`` with backslash continuations joined."""
    buf: list[str] = []
    start = 0
    for n, line in enumerate(text.splitlines(), 1):
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            buf.append(line.rstrip()[:-1])
            continue
        buf.append(line)
        yield start, " ".join(buf)
        buf = []
    if buf:
        yield start, " ".join(buf)


def find_in_text(text: str, where: str) -> list[Invocation]:
    """Every engine invocation in shell text, each named ``where:LINE``."""
    out: list[Invocation] = []
    exported: dict[str, str] = {}
    for line_no, line in _logical_lines(text):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError as err:
            if re.search(r"\b(vllm|sglang|llama-server)\b", line):
                raise InputError(f"cannot split the shell line: {err}", where=f"{where}:{line_no}") from None
            continue
        for cmd in _commands(tokens):
            if cmd[0] == "export":
                for a in cmd[1:]:
                    if _ENV.match(a):
                        k, _, v = a.partition("=")
                        exported[k] = v
                continue
            out.extend(find_in_argv(cmd, f"{where}:{line_no}", exported))
    return out
