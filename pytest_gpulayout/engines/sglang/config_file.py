"""SGLang's ``--config FILE``: the YAML file's keys merged into the command line as each release merges them.

``prepare_server_args`` (``sglang/srt/server_args.py``, 0.5.3 on) hands ``argv`` to ``ConfigArgumentMerger``
(``srt/server_args_config_parser.py``; ``srt/utils/`` from 0.5.19) when the word ``--config`` is in it; argparse
then reads ``config args + the line before --config + the line after FILE``, so the line's own flags win (CLI >
config > defaults). What differs by release is read from the wheel into the table's ``parser`` features
(``tools/flags_sglang_config.py``) and replayed here:

- ``config_booleans``: ``true`` is the bare flag and ``false`` dropped for every key (``none``, 0.5.3 - 0.5.7:
  the call site's ``hasattr(action, "action")`` finds no boolean action), for the store_true destinations and
  ``--key true|false`` for the others (``dest``, 0.5.8 - 0.5.22), or for any long spelling of a store_true flag
  (``spellings``, 0.5.23 ``_config_keys``);
- ``config_unsupported``: no key refused (``none``), keys of actions other than store_true / store refused by
  destination (``store``, 0.5.8 - 0.5.22: ``BooleanOptionalAction``, ``DeprecatedAction``, ``LoRAPathAction``),
  or of actions that take no single value, by any long spelling (``one_value``, 0.5.23);
- ``config_dicts``: a mapping as ``json.dumps`` (0.5.14 on) or Python's ``str``.

A refusal is the exception the merger raises, as ``ValueError: <its text>`` (the texts are the release's, from
the table); more than one ``--config``, ``--config`` last, a suffix other than ``.yaml`` / ``.yml``, a missing
file, a YAML document that is not a mapping (an empty file is none: nothing merged), an unsupported key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from pytest_gpulayout.inputs.config_file import NotHere
from pytest_gpulayout.inputs.flag_tables import Action, OptionSpec, ReleaseTable

#: argparse's own classes, by the action string the table records
_CLASSES = {Action.STORE: "_StoreAction", Action.STORE_TRUE: "_StoreTrueAction",
            Action.STORE_FALSE: "_StoreFalseAction", Action.STORE_CONST: "_StoreConstAction",
            Action.APPEND: "_AppendAction", Action.EXTEND: "_ExtendAction", Action.COUNT: "_CountAction",
            Action.HELP: "_HelpAction", Action.VERSION: "_VersionAction",
            Action.BOOLEAN_OPTIONAL: "BooleanOptionalAction"}
#: actions whose class sets ``nargs=0`` itself
_NO_VALUE = frozenset({Action.STORE_TRUE, Action.STORE_FALSE, Action.STORE_CONST, Action.COUNT, Action.HELP,
                       Action.VERSION, Action.BOOLEAN_OPTIONAL})
_EXCLUDED = frozenset({"--config", "--help", "-h"})


class Refused(Exception):
    """The merger's exception, as ``Type: text``."""


@dataclass(frozen=True)
class Merged:
    """The words argparse receives; ``path``: the file as the line names it ("" where no ``--config``);
    ``unread``: why the file could not be read here (the line is judged without its keys); ``error``: the
    release's refusal (``ValueError: ...``)."""

    args: tuple[str, ...]
    path: str = ""
    unread: str = ""
    error: str = ""


def _class_name(o: OptionSpec) -> str:
    if o.action_name.startswith("class:"):
        return o.action_name[len("class:"):]
    return _CLASSES.get(o.action, o.action_name)


def _strings(o: OptionSpec) -> tuple[str, ...]:
    """The option's ``option_strings`` as argparse holds them (``BooleanOptionalAction`` adds ``--no-x``)."""
    if o.action is Action.BOOLEAN_OPTIONAL:
        return (*o.flags, *(f"--no-{f[2:]}" for f in o.flags if f.startswith("--") and not f.startswith("--no-")))
    return o.flags


def _keys(o: OptionSpec, spellings: bool) -> set[str]:
    """0.5.23 ``_config_keys``: the destination and every long spelling, ``-`` as ``_``."""
    if not spellings:
        return {o.dest}
    return {o.dest} | {s[2:].replace("-", "_") for s in _strings(o) if s.startswith("--")}


def _one_value(o: OptionSpec) -> bool:
    """0.5.23 ``_takes_one_value``: a store action, or any whose ``nargs`` is None."""
    return o.action is Action.STORE or (o.action not in _NO_VALUE and o.nargs is None)


@dataclass(frozen=True)
class _Rules:
    store_true: frozenset[str]
    unsupported: Mapping[str, OptionSpec]
    dicts_json: bool
    keys_are_text: bool


def _rules(table: ReleaseTable) -> _Rules:
    f = table.parser
    options = [o for o in table.options if o.flags]
    booleans = str(f.get("config_booleans", "none"))
    mode = str(f.get("config_unsupported", "none"))
    spellings = booleans == "spellings"
    store_true = frozenset() if booleans == "none" else frozenset(
        k for o in options if o.action is Action.STORE_TRUE for k in _keys(o, spellings))
    unsupported: dict[str, OptionSpec] = {}
    if mode == "store":
        for o in options:
            if o.action not in (Action.STORE_TRUE, Action.STORE) and not _EXCLUDED & set(o.flags):
                unsupported[o.dest] = o
    elif mode == "one_value":
        supported = [o for o in options if o.action is Action.STORE_TRUE or _one_value(o)]
        supported_keys = {k for o in supported for k in _keys(o, True)}
        for o in options:
            if o not in supported and not _EXCLUDED & set(o.flags):
                for k in _keys(o, True):
                    if k not in supported_keys:
                        unsupported[k] = o
    return _Rules(store_true, unsupported, f.get("config_dicts") == "json", booleans != "none")


def _message(table: ReleaseTable, name: str, **fields: str) -> str:
    text = str(dict(table.parser.get("config_messages", {})).get(name, name))
    for k, v in fields.items():
        text = text.replace("{" + k + "}", v)
    return "ValueError: " + text


def _convert(config: Mapping[Any, Any], table: ReleaseTable, r: _Rules) -> list[str]:
    """``_convert_config_to_args``: each key as ``--key`` (as written) with its value's words."""
    out: list[str] = []
    for key, value in config.items():
        if r.keys_are_text:
            if not isinstance(key, str):
                raise Refused(f"AttributeError: '{type(key).__name__}' object has no attribute 'replace'")
            norm = key.replace("-", "_")
            if norm in r.unsupported:
                raise Refused(_message(table, "unsupported", key_norm=norm,
                                       **{"action.__class__.__name__": _class_name(r.unsupported[norm])}))
        if isinstance(value, bool):
            if r.keys_are_text and str(key).replace("-", "_") not in r.store_true:
                out += [f"--{key}", str(value).lower()]
            elif value:
                out.append(f"--{key}")
        elif isinstance(value, list):
            if value:
                out.append(f"--{key}")
                out.extend(_text(item) for item in value)
        elif isinstance(value, dict) and r.dicts_json:
            out += [f"--{key}", json.dumps(value)]
        else:
            out += [f"--{key}", _text(value)]
    return out


def _text(value: object) -> str:
    """Python's ``str`` of a YAML value (``None``, ``True``, ``0.85``, ``{'a': 1}``)."""
    return str(value)


def merge(args: Sequence[str], table: ReleaseTable, read: Callable[[str], str]) -> Merged:
    """``args`` (the words after the entry point) as ``ConfigArgumentMerger.merge_config_with_args`` of
    ``table``'s release hands them to argparse; ``read`` gives a file's text (``FileNotFoundError``: it does not
    exist; ``NotHere``: it exists only where the engine runs)."""
    words = list(args)
    if not table.parser.get("config") or "--config" not in words:
        return Merged(tuple(words))
    import yaml  # only when a line names a config file: importing the engine must not load YAML
    at = [i for i, w in enumerate(words) if w == "--config"]
    if len(at) > 1:
        return Merged(tuple(words), error=_message(table, "multiple"))
    i = at[0]
    if i == len(words) - 1:
        return Merged(tuple(words), error=_message(table, "no_file"))
    path = words[i + 1]
    rest = (*words[:i], *words[i + 2:])
    suffix = PurePosixPath(path).suffix
    if suffix.lower() not in (".yaml", ".yml"):
        return Merged(tuple(words), path, error=_message(table, "suffix", **{"path.suffix": suffix}))
    try:
        text = read(path)
    except NotHere as e:
        return Merged(rest, path, unread=str(e))
    except FileNotFoundError:
        return Merged(tuple(words), path, error=_message(table, "not_found", file_path=path))
    except OSError as e:
        return Merged(tuple(words), path, error=f"{type(e).__name__}: {e}")
    try:
        config = yaml.safe_load(text)
        if config is None:
            config = {}
        if not isinstance(config, dict):
            return Merged(tuple(words), path, error=_message(table, "not_dict"))
        merged = _convert(config, table, _rules(table))
    except yaml.YAMLError as e:
        return Merged(tuple(words), path, error=f"{type(e).__name__}: {' '.join(str(e).split())}")
    except Refused as e:
        return Merged(tuple(words), path, error=str(e))
    return Merged((*merged, *rest), path)
