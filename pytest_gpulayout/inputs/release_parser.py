"""A release's own ``argparse`` parser, rebuilt from its table (``flag_tables.ReleaseTable``) and run on a command
line: the same options in the same order, the same ``allow_abbrev``, actions, ``nargs``, ``choices`` and type
functions (``arg_types.py``), so the standard library's argparse decides exactly what the release's does: an
unambiguous prefix names an option, ``--max-num`` is "ambiguous option: --max-num could match ...",
``--enforce-eager=true`` is "ignored explicit argument 'true'", ``--max-model-len x`` is "invalid
human_readable_int value: 'x'", ``--dtype x`` an invalid choice.

The error is the line the release prints (``vllm serve: error: ...``): argparse stops at the first one, and so
does this. An unrecognized argument is reported by the parser above the subcommand where the release has one
(``vllm: error: unrecognized arguments: ...``, what ``vllm serve`` prints: argparse's sub-parsers hand their
leftovers up). The words are those of the Python running the check (3.10 - 3.12 word these errors alike).

``parse(table, args)`` -> ``Outcome`` (values by destination, with the release's defaults; the destinations
the line itself set; the error). One parser per release is built on first use and kept.
"""

from __future__ import annotations

import argparse
import contextvars
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from types import MappingProxyType
from typing import Any, NoReturn

from pytest_gpulayout.inputs.arg_types import Types
from pytest_gpulayout.inputs.flag_tables import Action, OptionSpec, ReleaseTable

#: a default the table does not hold as a literal (a config object): not reported as a value
NOT_READ = object()
_GIVEN: contextvars.ContextVar[set[str]] = contextvars.ContextVar("gpulayout_given")


class Refusal(Exception):
    """argparse's ``error()``: the parser's prog and the message."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


class Raised(Exception):
    """An engine Action that raises (SGLang 0.4's ``DeprecatedAction``: ``ValueError(help)``)."""


class _Exit(Exception):
    """``-h`` / ``--version``: argparse prints and exits with status 0 (the engine would not serve)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Refusal(self.prog, message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _Exit(status)

    def _print_message(self, message: str, file: Any = None) -> None:
        return None


def _recording(base: type[argparse.Action]) -> type[argparse.Action]:
    """``base`` that notes its destination as given when the command line reaches it."""

    def __call__(self: argparse.Action, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        given = _GIVEN.get(None)
        if given is not None and option_string is not None:
            given.add(self.dest)
        base.__call__(self, parser, namespace, values, option_string)

    return type(f"Recording{base.__name__}", (base,), {"__call__": __call__})


class EnableDisable(argparse.BooleanOptionalAction):
    """vLLM 0.33's ``EnableDisableAction`` (``utils/argparse_utils.py``): ``--enable-x`` also takes
    ``--disable-x`` (and the other way round) beside ``--no-enable-x``."""

    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}

    def __init__(self, option_strings: Sequence[str], dest: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, *args, **kwargs)
        inverses = [inverse + opt.removeprefix(prefix) for opt in option_strings
                    for prefix, inverse in self._inverse_prefixes.items() if opt.startswith(prefix)]
        negated = {opt for opt in self.option_strings if opt not in option_strings}
        self.negative_option_strings = negated | set(inverses)
        self.visible_option_strings = [*option_strings, *inverses] if inverses else list(self.option_strings)
        self.option_strings = [*self.option_strings, *inverses]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, option_string not in self.negative_option_strings)


class Custom(argparse.Action):
    """An engine's own Action class, as its table says it behaves (``OptionSpec.does``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, does: str = "store", does_value: Any = None,
                 does_message: str = "", **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.does, self.does_value, self.does_message = does, does_value, does_message

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if self.does == "error":
            parser.error(self.does_message)
        if self.does == "raise":
            raise Raised(self.does_message)
        if self.does == "const":
            setattr(namespace, self.dest, self.does_value)
        elif self.does == "bool_str":
            text = str(values).lower()
            if text not in ("true", "false"):
                raise Raised(f"ValueError: Invalid boolean value: {values}. Expected 'true' or 'false'.")
            setattr(namespace, self.dest, text == "true")
        elif self.does != "nothing":
            setattr(namespace, self.dest, values)


_BASES: dict[Action, str] = {
    Action.STORE: "store", Action.STORE_TRUE: "store_true", Action.STORE_FALSE: "store_false",
    Action.STORE_CONST: "store_const", Action.APPEND: "append", Action.EXTEND: "extend", Action.COUNT: "count",
}


@cache
def _action_class(action: Action) -> type[argparse.Action]:
    if action is Action.BOOLEAN_OPTIONAL:
        return _recording(argparse.BooleanOptionalAction)
    if action is Action.ENABLE_DISABLE:
        return _recording(EnableDisable)
    if action is Action.CUSTOM:
        return _recording(Custom)
    registry = argparse.ArgumentParser()._registry_get("action", _BASES[action], None)
    assert isinstance(registry, type)
    return _recording(registry)


def _add(parser: _Parser, o: OptionSpec, types: Types) -> None:
    if o.action in (Action.HELP, Action.VERSION):
        if any(s in parser._option_string_actions for s in o.flags):
            return  # argparse's own -h/--help
        parser.add_argument(*o.flags, action="help" if o.action is Action.HELP else "store_true", dest=o.dest)
        return
    kwargs: dict[str, Any] = {"action": _action_class(o.action)}
    if o.flags:
        kwargs["dest"] = o.dest
    if o.has_default:
        kwargs["default"] = argparse.SUPPRESS if o.default == argparse.SUPPRESS else o.default
    elif o.default_src:
        kwargs["default"] = NOT_READ
    if o.required and o.flags:
        kwargs["required"] = True
    if o.action is Action.CUSTOM:
        kwargs.update(does=o.does or "store", does_value=o.does_value, does_message=o.does_message)
        if o.const is not None:
            kwargs["const"] = o.const
    if o.action in (Action.STORE, Action.APPEND, Action.EXTEND, Action.CUSTOM):
        type_func = types.get(o.type)
        if type_func is not None:
            kwargs["type"] = type_func
        if o.nargs is not None:
            kwargs["nargs"] = o.nargs
        if o.const is not None and o.action is not Action.CUSTOM:
            kwargs["const"] = o.const
        if o.choices is not None and not o.choices_unknown:
            kwargs["choices"] = list(o.choices)
    elif o.action in (Action.STORE_CONST,):
        kwargs["const"] = o.const
    action = parser.add_argument(*(o.flags or (o.dest,)), **kwargs)
    if isinstance(action, EnableDisable):  # vLLM's _register_action: the hidden spellings leave the name
        action.option_strings = action.visible_option_strings


@lru_cache(maxsize=64)
def build(table: ReleaseTable) -> _Parser:
    """The release's parser (kept per release: argparse does not change a parser while parsing)."""
    parser = _Parser(prog=table.prog or table.engine, allow_abbrev=table.allow_abbrev, add_help=True)
    types = Types(table)
    for o in table.options:
        try:
            _add(parser, o, types)
        except (argparse.ArgumentError, ValueError, TypeError):  # pragma: no cover - a table argparse refuses
            continue
    return parser


@dataclass(frozen=True)
class Outcome:
    """What the release's parser made of a command line."""

    values: MappingProxyType[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    given: frozenset[str] = frozenset()
    error: str = ""                 # the line the release prints ("vllm serve: error: ..."), "" when accepted
    help: bool = False              # -h / --help: the release prints its help and exits without serving


def parse(table: ReleaseTable, args: Sequence[str]) -> Outcome:
    """Parse ``args`` (the words after the command) with the release's parser."""
    parser = build(table)
    token = _GIVEN.set(set())
    try:
        ns, extras = parser.parse_known_args(list(args))
        given = frozenset(_GIVEN.get())
    except Refusal as r:
        return Outcome(error=f"{r.prog}: error: {r.message}")
    except Raised as r:
        return Outcome(error=str(r))
    except _Exit:
        return Outcome(help=True, error=f"{parser.prog}: -h/--help prints the help and exits without serving")
    finally:
        _GIVEN.reset(token)
    values = {k: v for k, v in vars(ns).items() if v is not NOT_READ and k != "help"}
    for o in table.options:  # a positional is given when the line has one
        if o.positional and values.get(o.dest) not in (None, o.default, []):
            given = given | {o.dest}
    if extras:
        prog = table.top_prog or parser.prog
        message = f"unrecognized arguments: {' '.join(extras)}"
        hint = str(table.parser.get("task_hint", ""))
        if hint and any(e == "--task" or e.startswith("--task=") for e in extras):
            message += hint
        return Outcome(values=MappingProxyType(values), given=given, error=f"{prog}: error: {message}")
    return Outcome(values=MappingProxyType(values), given=given)
