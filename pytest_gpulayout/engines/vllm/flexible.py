"""What vLLM's ``FlexibleArgumentParser.parse_args`` does to ``vllm serve``'s command line before argparse reads
it, release by release (``vllm/utils/argparse_utils.py`` from 0.11.1, ``vllm/utils/__init__.py`` 0.9.2 - 0.11.0,
``vllm/utils.py`` before). The table's ``parser`` features say which variant each release has
(``tools/engine_flags.py`` reads them from that source):

- ``--model M`` (``model_flag``): allowed (0.8.0 - 0.8.2), refused with a ValueError (0.8.3 - 0.11.0), moved to
  the front as the positional model (0.11.1 on); from 0.17 a ``--served-model-name`` without a positional
  model is refused.
- ``--config FILE``: the YAML file's keys become flags placed after the model (the command line wins);
  ``true`` is the bare flag, ``false`` is dropped, a list its items (0.11.1), a mapping JSON (0.16).
- ``_`` to ``-`` in an option's name (``underscore``): the whole word (to 0.9.0), or up to the first ``.``.
- ``-O`` (``o_flag``): nothing (to 0.9.1: the test ``len(arg) == 2`` never holds), ``-O3`` as
  ``-O.level=3`` (0.9.2 - 0.11.0), ``-O.mode=3`` (0.11.1), ``--optimization-level 3`` (0.12 on).
- dotted keys (``dotted``): ``--compilation-config.mode 3`` gathered into ``--compilation-config '{"mode": 3}'``
  appended at the end (0.9.0 strings only; JSON values, ``-`` options and ``key+`` lists from 0.9.2; a
  human-readable int from 0.20).

A refusal here is the ValueError (or IndexError) the release raises, as ``ValueError: ...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_KEY = re.compile(r"(?<=--)[^\.]*")


class Raised(Exception):
    """The exception the release raises before argparse: its last traceback line."""


@dataclass(frozen=True)
class Rewritten:
    args: tuple[str, ...]
    error: str = ""
    #: the words a ``--config FILE`` put into the line (its keys as flags), in the order merged
    from_file: tuple[str, ...] = ()


def _message(features: Mapping[str, Any], key: str, default: str, **fields: str) -> str:
    text = str(dict(features.get("messages", {})).get(key, default))
    if text.startswith("tuple:"):  # ValueError('... %s supplied', extension): Python shows the tuple
        return str((text[len("tuple:"):], *fields.values()))
    for name, value in fields.items():
        text = text.replace("{" + name + "}", value)
    return text


def _model_flag(args: list[str], f: Mapping[str, Any]) -> list[str]:
    mode = f.get("model_flag", "none")
    if mode == "refuse" and any(a == "--model" for a in args):
        raise Raised("ValueError: " + _message(
            f, "model_refuse", "With `vllm serve`, you should provide the model as a positional argument or in a "
            "config file instead of via the `--model` option."))
    if mode == "move":
        regex = f.get("model_match") == "regex"
        for i, a in enumerate(args):
            if (re.match(r"^--model(=.+|$)", a) if regex else (a == "--model" or a.startswith("--model="))):
                if a == "--model":
                    if i + 1 >= len(args):
                        raise Raised("IndexError: list index out of range")
                    tag, rest = args[i + 1], i + 2
                else:
                    tag, rest = a.removeprefix("--model="), i + 1
                args = ["serve", tag, *args[1:i], *args[rest:]]
                break
    if f.get("served_name_check") and len(args) > 1 and args[1].startswith("-") and not any(
            re.match(r"^--config(=.+|$)", a) for a in args) and any(
            re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args):
        raise Raised("ValueError: " + _message(
            f, "served_name", "`model` should be provided as the first positional argument when using `vllm serve`."
            " i.e. `vllm serve <model> --<arg> <value>`."))
    return args


def _config_args(path: str, f: Mapping[str, Any], read: Callable[[str], str]) -> list[str]:
    import yaml  # only when a line names a config file: importing the engine must not load YAML

    extension = path.split(".")[-1]
    if extension not in ("yaml", "yml"):
        raise Raised("ValueError: " + _message(f, "config_ext", "Config file must be of a yaml/yml type. "
                                               "{extension} supplied", extension=extension))
    try:
        config = yaml.safe_load(read(path))
    except OSError as e:
        raise Raised(f"{type(e).__name__}: {e}") from e
    except yaml.YAMLError as e:
        raise Raised(f"{type(e).__name__}: {str(e).splitlines()[0]}") from e
    if not isinstance(config, dict):
        raise Raised(f"AttributeError: '{type(config).__name__}' object has no attribute 'items'")
    out: list[str] = []
    for key, value in config.items():
        if isinstance(value, bool):
            if value:
                out.append("--" + str(key))
            # false: dropped (the --no-<key> check looks at vllm's top parser, which has none)
        elif isinstance(value, list) and f.get("config_lists"):
            if value:
                out.append("--" + str(key))
                out.extend(str(item) for item in value)
        elif isinstance(value, dict) and f.get("config_dicts"):
            out += ["--" + str(key), json.dumps(value)]
        else:
            out += ["--" + str(key), str(value)]
    return out


def _pull_config(args: list[str], f: Mapping[str, Any], read: Callable[[str], str]) -> tuple[list[str], list[str]]:
    """The line with the file's keys merged, and those keys' words."""
    words = _merge_config(args, f, read)
    return words, _config_args(args[args.index("--config") + 1], f, read)


def _merge_config(args: list[str], f: Mapping[str, Any], read: Callable[[str], str]) -> list[str]:
    if args.count("--config") > 1:
        raise Raised("AssertionError: More than one config file specified!")
    index = args.index("--config")
    if index == len(args) - 1:
        raise Raised("ValueError: " + _message(f, "config_no_file", "No config file specified! Please check your "
                                               "command-line arguments."))
    config_args = _config_args(args[index + 1], f, read)
    if not f.get("config_model_check"):  # 0.8.0 - 0.8.2
        if index == 1:
            raise Raised("ValueError: " + _message(f, "config_no_model_tag", "No model_tag specified! Please check "
                                                   "your command-line arguments."))
        return [args[0], args[1], *config_args, *args[2:index], *args[index + 2:]]
    model_in_cli = len(args) > 1 and not args[1].startswith("-")
    model_in_config = any(a == "--model" for a in config_args)
    if not model_in_cli and not model_in_config:
        raise Raised("ValueError: " + _message(f, "config_no_model", "No model specified! Please specify model "
                                               "either as a positional argument or in a config file."))
    if model_in_cli:
        return [*args[:2], *config_args, *args[2:index], *args[index + 2:]]
    return [args[0], *config_args, *args[1:index], *args[index + 2:]]


def _rename(arg: str, f: Mapping[str, Any]) -> str:
    if f.get("underscore") == "before_dot":
        if "=" in arg:
            key, value = arg.split("=", 1)
            return f"{_KEY.sub(lambda m: m.group(0).replace('_', '-'), key, count=1)}={value}"
        return _KEY.sub(lambda m: m.group(0).replace("_", "-"), arg, count=1)
    if "=" in arg:
        key, value = arg.split("=", 1)
        return "--" + key[2:].replace("_", "-") + "=" + value
    return "--" + arg[2:].replace("_", "-")


def _o_flag(args: list[str], i: int, f: Mapping[str, Any]) -> list[str] | None:
    """``-O...`` rewritten as the release does (None: left as it is)."""
    arg = args[i]
    mode = f.get("o_flag", "none")
    if mode == "none":
        return None
    if arg.startswith("-O") and arg != "-O" and not (f.get("o_skip_dot") and arg[2] == "."):
        level = arg[3:] if arg[2] == "=" else arg[2:]
        if mode == "optimization_level":
            return ["--optimization-level", level]
        return [f"-O.{'mode' if mode == 'mode_dotted' else 'level'}={level}"]
    if arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
        if mode == "optimization_level":
            return ["--optimization-level"]
        return [f"-O.{'mode' if mode == 'mode_dotted' else 'level'}"]
    if f.get("o_dotted_to_cc") and arg.startswith("-O."):
        return [arg.replace("-O", "-cc", 1)]
    return None


def _nested(keys: list[str], value: Any) -> Any:
    for key in reversed(keys):
        value = {key: value}
    return value


def _merge(original: dict[str, Any], update: Mapping[str, Any], lists: bool) -> None:
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            _merge(original[k], v, lists)
        elif lists and isinstance(v, list) and isinstance(original.get(k), list):
            original[k] += v
        else:
            original[k] = v


def _dotted(args: list[str], f: Mapping[str, Any], hri: Callable[[str], int]) -> list[str]:
    mode = f.get("dotted", "none")
    if mode == "none":
        return args
    json_values = mode == "json"
    dash = bool(f.get("dotted_dash"))
    delete: set[int] = set()
    dict_args: dict[str, dict[str, Any]] = {}
    for i, arg in enumerate(args):
        if json_values and i in delete:
            continue
        if not ((arg.startswith("-") if dash else arg.startswith("--")) and "." in arg):
            continue
        if "=" in arg:
            arg, value_str = arg.split("=", 1)
            if "." not in arg:
                continue
        else:
            if i + 1 >= len(args):
                raise Raised("IndexError: list index out of range")
            value_str = args[i + 1]
            delete.add(i + 1)
        if f.get("dotted_plus") and arg.endswith("+"):
            arg = arg[:-1]
            value_str = json.dumps(list(value_str.split(",")))
        key, *keys = arg.split(".")
        value: Any = value_str
        if json_values:
            try:
                value = json.loads(value_str)
            except json.JSONDecodeError:
                if f.get("dotted_hri"):
                    try:
                        value = hri(value_str)
                    except (ValueError, TypeError):
                        value = value_str
                    except Exception:  # ArgumentTypeError: decimals with binary suffixes
                        value = value_str
        _merge(dict_args.setdefault(key, {}), _nested(keys, value), lists=json_values)
        delete.add(i)
    out = [a for i, a in enumerate(args) if i not in delete]
    for key, value in dict_args.items():
        out += [key, json.dumps(value)]
    return out


def rewrite(args: Sequence[str], features: Mapping[str, Any], *, hri: Callable[[str], int],
            read: Callable[[str], str]) -> Rewritten:
    """``args`` (the words after ``vllm serve``) as argparse receives them from this release."""
    f = features
    words = ["serve", *args]
    try:
        words = _model_flag(words, f)
        from_file: list[str] = []
        if f.get("config") and "--config" in words:
            words, from_file = _pull_config(words, f, read)
        processed: list[str] = []
        for i, arg in enumerate(words):
            if f.get("help_keyword") and arg.startswith("--help="):
                processed.append("--help")
            elif arg.startswith("--"):
                processed.append(_rename(arg, f))
            else:
                o = _o_flag(words, i, f)
                processed.extend(o if o is not None else [arg])
        processed = _dotted(processed, f, hri)
    except Raised as r:
        return Rewritten(tuple(args), str(r))
    return Rewritten(tuple(processed[1:]), from_file=tuple(from_file))
