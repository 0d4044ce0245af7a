#!/usr/bin/env python3
"""How each SGLang release merges ``--config FILE`` into its command line, read from its wheel's sources (the
``parser`` features of ``engines/sglang/flags/releases.json``; ``engines/sglang/config_file.py`` replays them).

``prepare_server_args`` (``sglang/srt/server_args.py``) hands ``argv`` to ``ConfigArgumentMerger`` when the word
``--config`` is in it (0.5.3 on; ``srt/server_args_config_parser.py``, ``srt/utils/`` from 0.5.19). What differs
by release, each read from that source:

- ``config_booleans``: which YAML ``true`` / ``false`` become a bare flag. ``none`` (0.5.3 - 0.5.7): the call
  site passes ``boolean_actions`` gathered with ``hasattr(action, "action")``, which no argparse action has, so
  the list is empty and every ``true`` is the bare flag, every ``false`` dropped; ``dest``: the
  ``_StoreTrueAction`` destinations (``ConfigArgumentMerger(parser)``), other booleans ``--key true|false``;
  ``spellings``: any long spelling of a store_true flag (``_config_keys``).
- ``config_unsupported``: which keys are refused ("Unsupported config option ..."): ``none``; ``store`` (every
  action but store_true / store, by destination); ``one_value`` (also any action with ``nargs=None``, by any long
  spelling, unless a supported flag reads the same key).
- ``config_dicts``: a mapping value as ``json.dumps`` (``json``) or as Python's ``str`` (``str``).
- ``config_messages``: the merger's ``raise ValueError(...)`` texts, ``{expression}`` where the f-string has one.

    python tools/flags_sglang_config.py DIR...     # unpacked sglang-<version>/ folders or wheels: patch the table
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

from flags_source import Sources

SERVER = "sglang/srt/server_args.py"
MERGERS = ("sglang/srt/utils/server_args_config_parser.py", "sglang/srt/server_args_config_parser.py")
#: the function each refusal is raised in -> its name in the table
_RAISERS = {"_extract_config_file_path": ("multiple", "no_file"), "_parse_yaml_config": ("not_dict",),
            "_validate_yaml_file": ("suffix", "not_found"), "_convert_config_to_args": ("unsupported",)}


def _template(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                out.append("{" + ast.unparse(part.value) + "}")
        return "".join(out)
    if isinstance(node, ast.Name):  # msg = f"..."; raise ValueError(msg)
        return "$" + node.id
    raise SystemExit(f"unexpected ValueError argument {ast.unparse(node)}")


def _messages(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or fn.name not in _RAISERS:
            continue
        assigned = {t.id: n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                    for t in n.targets if isinstance(t, ast.Name)}
        texts = []
        for n in ast.walk(fn):
            if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and ast.unparse(n.exc.func) == "ValueError":
                t = _template(n.exc.args[0])
                texts.append(_template(assigned[t[1:]]) if t.startswith("$") else t)
        for name, text in zip(_RAISERS[fn.name], sorted(texts, key=lambda t: _order(fn, t)), strict=False):
            out[name] = text
    return out


def _order(fn: ast.FunctionDef, text: str) -> int:
    """Source order of a message (``ast.walk`` is breadth-first)."""
    src = ast.unparse(fn)
    head = re.sub(r"\{.*", "", text)
    return src.find(head) if head in src else len(src)


def merger_facts(src: Sources) -> dict[str, Any]:
    """The ``parser`` features a release's ``--config`` merge has (empty where it has none)."""
    if not src.has(SERVER) or '"--config" in argv' not in src.text(SERVER):
        return {}
    member = next((m for m in MERGERS if src.has(m)), None)
    if member is None:
        raise SystemExit(f"{src.wheel}: '--config' in argv but no server_args_config_parser.py")
    server, merger = src.text(SERVER), src.text(member)
    if "ConfigArgumentMerger(parser)" in server:
        booleans = "spellings" if "def _config_keys" in merger else "dest"
    elif 'hasattr(action, "action")' in server:
        booleans = "none"  # argparse actions have no attribute "action": the list is always empty
    else:
        raise SystemExit(f"{src.wheel}: unknown ConfigArgumentMerger call in {SERVER}")
    if "unsupported_actions" not in merger or booleans == "none":
        unsupported = "none"
    else:
        unsupported = "one_value" if "def _takes_one_value" in merger else "store"
    return {"config_file": member, "config_booleans": booleans, "config_unsupported": unsupported,
            "config_dicts": "json" if "isinstance(value, dict)" in merger else "str",
            "config_messages": _messages(ast.parse(merger))}


def _version_of(src: Sources) -> str:
    m = re.search(r"sglang-(\d[^-/]*?)(?:-py3|$)", src.wheel) or re.search(r"sglang-(\d[^/]*)$", str(src.path))
    if m is None:
        raise SystemExit(f"{src.path}: not an sglang-<version> wheel or folder")
    return m.group(1)


def patch(table: Path, sources: list[Sources]) -> int:
    """Set each release's ``parser`` features in the packed ``table`` (a record keeps them only where they
    differ from the release before, as ``inputs/flag_tables.pack`` writes them)."""
    data = json.loads(table.read_text())
    facts = {_version_of(s): merger_facts(s) for s in sources}
    prev: dict[str, Any] = {}
    changed = 0
    for rec in data["releases"]:
        parser = dict(rec.get("parser", prev))
        version = str(rec["version"])
        if version in facts:
            parser = {k: v for k, v in parser.items() if not k.startswith("config_")} | facts[version]
            changed += 1
        if parser != prev or "parser" in rec:
            rec["parser"] = parser
        if parser == prev and rec is not data["releases"][0]:
            rec.pop("parser", None)
        prev = parser
    table.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    return changed


def main(argv: list[str]) -> int:
    table = Path(__file__).resolve().parent.parent / "pytest_gpulayout/engines/sglang/flags/releases.json"
    n = patch(table, [Sources(Path(a)) for a in argv])
    print(f"{table}: --config facts of {n} releases")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
