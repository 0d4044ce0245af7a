"""Shell text read as a shell runs it: which commands it starts, with which words and environment.

The grammar is tree-sitter-bash (the ``shell`` extra: ``tree-sitter`` and ``tree-sitter-bash``, MIT, wheels
for every platform, maintained by the tree-sitter project). bashlex, the pure-Python alternative, is GPLv3
(this project is Apache-2.0), unreleased since January 2023, and refuses ``$((...))``, ``case``, arrays and
``[[ ]]``, all of which deployment scripts use.

On the parse tree this module does what the shell would, statically:

* statements in order: ``;`` ``&&`` ``||`` ``|`` ``&``, subshells, groups, ``if`` / ``case`` / loop bodies (a
  ``for`` over literal words runs once per word), functions where they are called, ``eval``;
* words expanded: quotes (across lines too), escapes, ``\\`` continuations, ``$VAR`` ``${VAR}``
  ``${VAR:-x}`` ``${VAR:=x}`` ``${VAR:+x}`` ``${VAR#p}`` ``${VAR%p}`` ``${VAR/p/r}`` ``${VAR:o:n}`` ``${#VAR}``,
  arrays, ``$((...))``, ``$1`` / ``"$@"``, unquoted expansions split into words; the variables are the given
  environment (a container's ``env``) and the script's own assignments (``export`` marks what children see);
  what neither gives (``$NNODES``, ``$(hostname)``) keeps its text and is listed in ``Command.unknown``;
* heredoc bodies are data, except when a shell reads them as its script (``bash <<EOF``);
* ``source FILE`` / ``. FILE`` (the same shell) and ``bash FILE ARGS`` (a child shell) are read where the caller
  gives the file (``files``: a script of the same artifact); their commands carry its name and their lines in it;
* launchers are unwrapped with their options (``inputs/launchers.py``): ``srun``, ``mpirun``, ``torchrun``,
  ``nohup``, ``timeout``, ``numactl``, ``taskset``, ``env VAR=x``, ``exec``, ``sudo``, ``docker run IMAGE``
  (the image recorded, the container's environment its ``-e``), ``ray job submit --``, ``kubectl exec --``,
  ``ssh host CMD``; ``sh -c`` / ``bash -lc`` / ``-ec`` strings are read as scripts of a child shell.

Every command found carries its line in the text given (a command inside a ``bash -c`` string, the line its
words stand on). Syntax errors are returned, not raised: the caller knows which ones matter.
"""

from __future__ import annotations

import bisect
import fnmatch
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs import launchers as L

try:  # a dependency; a broken install is refused in one line (``read_script``), never a traceback
    import tree_sitter_bash
    from tree_sitter import Language, Node, Parser, Tree

    HAVE_GRAMMAR = True
except ImportError:  # pragma: no cover - only where the install is broken
    HAVE_GRAMMAR = False

MISSING_GRAMMAR = ("reading shell text needs the shell grammar (tree-sitter-bash), which did not import: "
                   "pip install --force-reinstall tree-sitter tree-sitter-bash")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
#: ``bash -c`` inside ``bash -c`` ... and functions calling themselves: deeper than this is not followed
_MAX_DEPTH = 12
_MAX_LOOP = 16
#: nodes that are words, not statements: a walk does not descend into them
_WORDS = frozenset({"word", "string", "raw_string", "ansi_c_string", "simple_expansion", "expansion",
                    "concatenation", "number", "heredoc_body", "heredoc_start", "heredoc_end", "file_redirect",
                    "herestring_redirect", "heredoc_redirect", "variable_name", "command_substitution",
                    "arithmetic_expansion", "regex", "extglob_pattern", "test_operator", "translated_string"})


@dataclass(frozen=True)
class Command:
    """One command a script runs, as it would run."""

    argv: tuple[str, ...]
    #: 1-based line in the text given where its first word stands
    line: int
    #: the environment it runs with: the exported variables, its ``VAR=x`` prefixes, ``env`` / ``docker -e``
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: the container image it runs in (``docker run IMAGE``, ``srun --container-image``); "" where none is said
    image: str = ""
    #: variables (``$NNODES``) and substitutions (``$(hostname)``) whose value neither the script nor the given
    #: environment says; their text stays in ``argv``
    unknown: tuple[str, ...] = ()
    #: the launchers and shells around it, outermost first (``srun``, ``bash -c``)
    via: tuple[str, ...] = ()
    #: the script it stands in where that is another file than the text given (``source env.sh``,
    #: ``bash serve.sh``: its name as ``files`` gave it); "" for the text itself
    file: str = ""


@dataclass(frozen=True)
class SyntaxProblem:
    """A part of the text the shell would refuse (an unclosed quote, a stray ``fi``)."""

    line: int
    text: str
    file: str = ""


#: a script another one runs or sources, by the path it names: ``(its text, the name to show)``, or None where it
#: is not part of what was given (``read_script``'s ``files``)
Files = Callable[[str], "tuple[str, str] | None"]


@dataclass(frozen=True)
class Script:
    commands: tuple[Command, ...]
    problems: tuple[SyntaxProblem, ...] = ()


# -- the shell's state -------------------------------------------------------------------------------------------

@dataclass
class _Vars:
    values: dict[str, str | tuple[str, ...]]
    exported: set[str]
    #: ``$1`` ...; None: the script's own arguments, which the text does not say
    positional: tuple[str, ...] | None = None
    arg0: str = "sh"
    functions: dict[str, tuple[Node, _Reader]] = field(default_factory=dict)
    #: variables whose value was built from unknown ones (``MODEL=$1``): what they stand for
    tainted: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def child(self, env: Mapping[str, str], positional: tuple[str, ...] | None, arg0: str = "sh") -> _Vars:
        """A child shell's: what was exported, plus ``env``."""
        exported = {k: v for k, v in self.values.items() if k in self.exported and isinstance(v, str)}
        values: dict[str, str | tuple[str, ...]] = {**exported, **env}
        tainted = {k: v for k, v in self.tainted.items() if k in exported and k not in env}
        return _Vars(values, set(values), positional, arg0, tainted=tainted)

    def environ(self) -> dict[str, str]:
        return {k: v for k, v in self.values.items() if k in self.exported and isinstance(v, str)}


class _Unknown(Exception):
    def __init__(self, name: str):
        self.name = name


@dataclass
class _Field:
    """One word being built: its text and the source row of each character (for ``bash -c`` strings)."""

    text: str = ""
    rows: list[int] = field(default_factory=list)

    def add(self, text: str, row: int, *, literal: bool = True) -> None:
        for ch in text:
            self.text += ch
            self.rows.append(row)
            if ch == "\n" and literal:
                row += 1


def _dq_unescape(raw: str) -> str:
    """Backslashes inside double quotes: only before ``$ ` " \\`` and a newline do they escape."""
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), raw)


def _unquoted_unescape(raw: str) -> str:
    return re.sub(r"\\(.)", lambda m: "" if m.group(1) == "\n" else m.group(1), raw, flags=re.S)


def _glob_regex(pattern: str) -> str:
    out = ""
    for ch in pattern:
        out += ".*" if ch == "*" else "." if ch == "?" else re.escape(ch)
    return out


class _Reader:
    """Reads one parse tree; nested scripts (``bash -c``) get a reader of their own."""

    def __init__(self, src: bytes, shell: _Vars, out: list[Command], problems: list[SyntaxProblem],
                 row_of: Callable[[int], int], depth: int, via: tuple[str, ...], *, files: Files | None = None,
                 file: str = ""):
        self.files = files
        self.file = file
        self.src = src
        self.vars = shell
        self.out = out
        self.problems = problems
        self.row_of = row_of        # byte offset in src -> 0-based row in the top text
        self.depth = depth
        self.via = via
        self.unknown: list[str] = []

    # -- words -----------------------------------------------------------------------------------------------

    def _text(self, a: int, b: int) -> str:
        return self.src[a:b].decode("utf-8", "replace")

    def _lookup(self, name: str) -> str | tuple[str, ...] | None:
        if name.isdigit():
            if name == "0":
                return self.vars.arg0
            pos = self.vars.positional
            if pos is None:
                raise _Unknown(f"${name}")
            return pos[int(name) - 1] if int(name) <= len(pos) else ""
        if name in ("@", "*"):
            if self.vars.positional is None:
                raise _Unknown(f"${name}")
            return self.vars.positional
        if name == "#":
            if self.vars.positional is None:
                raise _Unknown("$#")
            return str(len(self.vars.positional))
        if name in self.vars.tainted:
            self.unknown.extend(self.vars.tainted[name])
        return self.vars.values.get(name)

    def words(self, node: Node) -> list[_Field]:
        """The words ``node`` (one shell word) expands to."""
        fields: list[_Field] = []
        self._word(node, fields, quoted=False, start=True)
        return fields

    def word(self, node: Node) -> _Field:
        """``node`` expanded as one word (an assignment's value, a ``case`` subject)."""
        fields: list[_Field] = [_Field()]
        self._word(node, fields, quoted=True, start=False)
        return fields[0]

    def _append(self, fields: list[_Field], text: str, row: int, *, quoted: bool, split: bool,
                new: bool, literal: bool = True) -> bool:
        """Add expanded ``text`` to the word being built; ``split``: unquoted expansion, which splits at blanks.
        Returns whether the next piece starts a new word."""
        if not split or quoted:
            if new or not fields:
                fields.append(_Field())
            fields[-1].add(text, row, literal=literal)
            return False
        parts = text.split()
        if not parts:
            return new or bool(text)  # nothing, or only blanks: the word (if any) ends here
        for k, part in enumerate(parts):
            if (k == 0 and (new or not fields or text[:1].isspace())) or k > 0:
                fields.append(_Field())
            fields[-1].add(part, row, literal=False)
        return text[-1:].isspace()

    def _word(self, node: Node, fields: list[_Field], *, quoted: bool, start: bool) -> bool:
        """Expand ``node`` into ``fields``; ``start``: it begins a new word. Returns the same for what follows."""
        t = node.type
        row = self.row_of(node.start_byte)
        raw = self._text(node.start_byte, node.end_byte)
        if t in ("word", "number", "regex", "extglob_pattern", "test_operator", "special_variable_name",
                 "variable_name", "file_descriptor"):
            if t == "number" and node.named_children:
                return self._concat(node, fields, quoted=quoted, start=start)
            text = raw if t in ("regex", "extglob_pattern") else _unquoted_unescape(raw)
            return self._append(fields, text, row, quoted=True, split=False, new=start)
        if t == "raw_string":
            return self._append(fields, raw[1:-1], row, quoted=True, split=False, new=start)
        if t == "ansi_c_string":
            body = raw[2:-1]
            try:
                text = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
            except UnicodeDecodeError:
                text = body
            return self._append(fields, text, row, quoted=True, split=False, new=start)
        if t in ("string", "translated_string", "heredoc_body"):
            return self._string(node, fields, start=start)
        if t == "concatenation":
            return self._concat(node, fields, quoted=quoted, start=start)
        if t in ("simple_expansion", "expansion"):
            return self._expansion(node, fields, quoted=quoted, start=start)
        if t == "arithmetic_expansion":
            try:
                value = str(self._arith(node.named_children[0])) if node.named_children else "0"
            except _Unknown as err:
                self.unknown.append(err.name)
                value = raw
            return self._append(fields, value, row, quoted=quoted, split=not quoted, new=start, literal=False)
        if t in ("command_substitution", "process_substitution"):
            self.unknown.append(raw)
            return self._append(fields, raw, row, quoted=True, split=False, new=start)
        if t == "string_content":
            return self._append(fields, _dq_unescape(raw), row, quoted=True, split=False, new=start)
        return self._append(fields, raw, row, quoted=True, split=False, new=start)

    def _concat(self, node: Node, fields: list[_Field], *, quoted: bool, start: bool) -> bool:
        new = start
        pos = node.start_byte
        for child in node.children:
            if child.start_byte > pos:  # text the grammar left between its parts
                gap = self._text(pos, child.start_byte)
                new = self._append(fields, _unquoted_unescape(gap), self.row_of(pos), quoted=True, split=False,
                                   new=new)
            new = self._word(child, fields, quoted=quoted, start=new)
            pos = child.end_byte
        if node.end_byte > pos:
            gap = self._text(pos, node.end_byte)
            new = self._append(fields, gap, self.row_of(pos), quoted=True, split=False, new=new)
        return new

    def _string(self, node: Node, fields: list[_Field], *, start: bool) -> bool:
        """A double-quoted string (or an unquoted heredoc body): one word, ``"$@"`` aside."""
        heredoc = node.type == "heredoc_body"
        children = [c for c in node.children if c.type not in ('"', "$")]
        a = node.start_byte if heredoc else node.start_byte + (2 if node.type == "translated_string" else 1)
        b = node.end_byte if heredoc else node.end_byte - 1
        if start or not fields:
            fields.append(_Field())
        pos = a
        for child in children:
            if child.start_byte > pos:
                fields[-1].add(_dq_unescape(self._text(pos, child.start_byte)), self.row_of(pos))
            if child.type in ("string_content", "heredoc_content"):
                fields[-1].add(_dq_unescape(self._text(child.start_byte, child.end_byte)),
                               self.row_of(child.start_byte))
            else:
                self._word(child, fields, quoted=True, start=False)
            pos = child.end_byte
        if b > pos:
            fields[-1].add(_dq_unescape(self._text(pos, b)), self.row_of(pos))
        return False

    def _expansion(self, node: Node, fields: list[_Field], *, quoted: bool, start: bool) -> bool:
        raw = self._text(node.start_byte, node.end_byte)
        row = self.row_of(node.start_byte)
        try:
            value = self._expand(node)
        except _Unknown:
            self.unknown.append(raw)  # as written: the text that stays in the word
            return self._append(fields, raw, row, quoted=True, split=False, new=start)
        if isinstance(value, tuple):  # "$@", "${arr[@]}": one word each
            new = start
            for k, item in enumerate(value):
                new = self._append(fields, item, row, quoted=quoted, split=not quoted, new=new or k > 0,
                                   literal=False)
            return new if value else start
        return self._append(fields, value, row, quoted=quoted, split=not quoted, new=start, literal=False)

    def _expand(self, node: Node) -> str | tuple[str, ...]:
        """The value of ``$X`` / ``${...}`` (an ``_Unknown`` where nothing gives it)."""
        kids = [c for c in node.children if c.type not in ("$", "${", "}")]
        if node.type == "simple_expansion":
            name = self._text(kids[0].start_byte, kids[0].end_byte) if kids else ""
            value = self._lookup(name)
            if value is None:
                raise _Unknown(f"${name}")
            return value
        length = indirect = False
        if kids and kids[0].type == "#" and len(kids) > 1:
            length, kids = True, kids[1:]
        elif kids and kids[0].type == "!":
            indirect, kids = True, kids[1:]
        if not kids:
            raise _Unknown(self._text(node.start_byte, node.end_byte))
        target = kids[0]
        index: str | None = None
        if target.type == "subscript":
            sub = target.named_children
            name = self._text(sub[0].start_byte, sub[0].end_byte) if sub else ""
            index = self.word(sub[1]).text if len(sub) > 1 else "0"
        else:
            name = self._text(target.start_byte, target.end_byte)
        op = kids[1].type if len(kids) > 1 else ""
        operand = kids[2:] if len(kids) > 2 else []
        value = self._lookup(name)
        if indirect and isinstance(value, str):
            value = self._lookup(value)
        if isinstance(value, tuple) and index is not None:
            value = value if index in ("@", "*") else (value[int(index)] if index.isdigit()
                                                       and int(index) < len(value) else "")
        elif isinstance(value, tuple):
            value = value[0] if value else ""
        if length:
            if value is None:
                raise _Unknown(f"${{#{name}}}")
            return str(len(value))
        unset = value is None
        empty = unset or value == ""
        text = " ".join(self.word(o).text for o in operand) if operand else ""
        if op in (":-", "-", ":=", "="):
            if empty if op.startswith(":") else unset:
                if "=" in op:
                    self.vars.values[name] = text
                return text
            if value is not None:
                return value
        if op in (":+", "+"):
            return "" if (empty if op == ":+" else unset) else text
        if value is None or op in (":?", "?") and empty:
            raise _Unknown(f"${name}")
        if isinstance(value, tuple):
            return value
        if op in ("#", "##", "%", "%%"):
            pattern = self._text(operand[0].start_byte, operand[-1].end_byte) if operand else ""
            cuts = range(len(value) + 1)
            if op.startswith("#"):
                hits = [i for i in cuts if fnmatch.fnmatchcase(value[:i], pattern)]
                return value[(max(hits) if op == "##" else min(hits)):] if hits else value
            hits = [i for i in cuts if fnmatch.fnmatchcase(value[i:], pattern)]
            return value[:(min(hits) if op == "%%" else max(hits))] if hits else value
        if op in ("/", "//"):
            pattern = self.word(operand[0]).text if operand else ""
            repl = self.word(operand[-1]).text if len(operand) > 1 else ""
            return re.sub(_glob_regex(pattern), lambda _m: repl, value, count=0 if op == "//" else 1)
        if op == ":":
            nums = [o for o in operand if o.type != ":"]
            offset = self._arith(nums[0]) if nums else 0
            sliced = value[offset:] if offset >= 0 else value[len(value) + offset:]
            return sliced[:self._arith(nums[1])] if len(nums) > 1 else sliced
        if op in ("^^", "^"):
            return value.upper() if op == "^^" else value[:1].upper() + value[1:]
        if op in (",,", ","):
            return value.lower() if op == ",," else value[:1].lower() + value[1:]
        if op == "":
            return value
        raise _Unknown(self._text(node.start_byte, node.end_byte))

    def _arith(self, node: Node) -> int:
        t = node.type
        raw = self._text(node.start_byte, node.end_byte).strip()
        if t == "number":
            try:
                if "#" in raw:
                    base, _, digits = raw.partition("#")
                    return int(digits, int(base))
                return int(raw, 0) if not re.fullmatch(r"0[0-7]+", raw) else int(raw, 8)
            except ValueError:
                raise _Unknown(raw) from None
        if t == "variable_name" or t in ("simple_expansion", "expansion", "word"):
            text = raw if t == "variable_name" else None
            if text is not None:
                value = self._lookup(text)
                if value is None or isinstance(value, tuple):
                    raise _Unknown(f"${text}")
            else:
                value = self.word(node).text
            try:
                return int(str(value).strip() or "0", 0)
            except ValueError:
                raise _Unknown(raw) from None
        if t == "parenthesized_expression":
            return self._arith(node.named_children[0])
        if t == "unary_expression":
            op = node.children[0].type
            v = self._arith(node.named_children[-1])
            return {"-": -v, "+": v, "!": int(not v), "~": ~v}.get(op, v)
        if t == "ternary_expression":
            a, b, c = node.named_children[:3]
            return self._arith(b) if self._arith(a) else self._arith(c)
        if t == "binary_expression":
            left, right = node.named_children[0], node.named_children[-1]
            op = next((c.type for c in node.children if not c.is_named), "")
            x, y = self._arith(left), self._arith(right)
            ops: dict[str, Callable[[int, int], int]] = {
                "+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q,
                "/": lambda p, q: int(p / q), "%": lambda p, q: p - q * int(p / q), "**": lambda p, q: p ** q,
                "<<": lambda p, q: p << q, ">>": lambda p, q: p >> q, "&": lambda p, q: p & q,
                "|": lambda p, q: p | q, "^": lambda p, q: p ^ q, "&&": lambda p, q: int(bool(p and q)),
                "||": lambda p, q: int(bool(p or q)), "==": lambda p, q: int(p == q), "!=": lambda p, q: int(p != q),
                "<": lambda p, q: int(p < q), ">": lambda p, q: int(p > q), "<=": lambda p, q: int(p <= q),
                ">=": lambda p, q: int(p >= q)}
            if op not in ops or (op in ("/", "%") and y == 0):
                raise _Unknown(raw)
            return ops[op](x, y)
        raise _Unknown(raw)

    # -- statements ------------------------------------------------------------------------------------------

    def walk(self, node: Node) -> None:
        t = node.type
        if t == "ERROR":
            return  # what the shell would refuse (``problems``); the statements around it are still read
        if t == "comment":
            return
        if t == "variable_assignment":
            self._assign(node, local=False)
            return
        if t == "variable_assignments":
            for child in node.named_children:
                self._assign(child, local=False)
            return
        if t == "declaration_command":
            self._declare(node)
            return
        if t == "unset_command":
            for child in node.named_children:
                if child.type in ("variable_name", "word"):
                    self.vars.values.pop(self._text(child.start_byte, child.end_byte), None)
            return
        if t == "command":
            self._command(node, None)
            return
        if t == "redirected_statement":
            body = node.child_by_field_name("body") or (node.named_children[0] if node.named_children else None)
            heredoc = next((c for c in node.named_children if c.type == "heredoc_redirect"), None)
            if body is not None and body.type == "command":
                self._command(body, heredoc)
            elif body is not None:
                self.walk(body)
            return
        if t == "function_definition":
            name = node.child_by_field_name("name") or node.named_children[0]
            body = node.child_by_field_name("body") or node.named_children[-1]
            self.vars.functions[self._text(name.start_byte, name.end_byte)] = (body, self)
            return
        if t == "for_statement":
            self._for(node)
            return
        if t == "subshell":
            saved = (dict(self.vars.values), set(self.vars.exported))
            for child in node.named_children:
                self.walk(child)
            self.vars.values, self.vars.exported = saved
            return
        for child in node.named_children:  # if / while / case / groups / lists / pipelines: their statements
            if child.type not in _WORDS:
                self.walk(child)

    def _for(self, node: Node) -> None:
        var_node = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        values = [c for c in node.children_by_field_name("value")]
        if var_node is None or body is None:
            for child in node.named_children:
                self.walk(child)
            return
        name = self._text(var_node.start_byte, var_node.end_byte)
        mark = len(self.unknown)
        words = [f.text for v in values for f in self.words(v)]
        known = len(self.unknown) == mark and values and len(words) <= _MAX_LOOP
        del self.unknown[mark:]
        for value in (words if known else [None]):
            if value is None:
                self.vars.values.pop(name, None)
            else:
                self.vars.values[name] = value
            self.walk(body)

    def _assign(self, node: Node, *, local: bool) -> str | None:
        kids = node.named_children
        if not kids:
            return None
        name_node = kids[0]
        name = self._text(name_node.start_byte, name_node.end_byte)
        if name_node.type == "subscript":
            return None
        append = any(c.type == "+=" for c in node.children)
        value_node = kids[1] if len(kids) > 1 else None
        mark = len(self.unknown)
        value: str | tuple[str, ...]
        if value_node is None:
            value = ""
        elif value_node.type == "array":
            value = tuple(f.text for c in value_node.named_children for f in self.words(c))
        else:
            value = self.word(value_node).text
        old = self.vars.values.get(name)
        if append and isinstance(old, str) and isinstance(value, str):
            value = old + value
        elif append and isinstance(old, tuple):
            value = old + (value if isinstance(value, tuple) else (value,))
        self.vars.values[name] = value
        tainted = tuple(dict.fromkeys(self.unknown[mark:]))
        del self.unknown[mark:]
        if tainted:
            self.vars.tainted[name] = tainted
        else:
            self.vars.tainted.pop(name, None)
        return name

    def _declare(self, node: Node) -> None:
        keyword = node.children[0].type if node.children else ""
        flags = "".join(self._text(c.start_byte, c.end_byte)[1:] for c in node.named_children
                        if c.type == "word" and self._text(c.start_byte, c.end_byte).startswith("-"))
        export = keyword == "export" or "x" in flags
        for child in node.named_children:
            if child.type == "variable_assignment":
                name = self._assign(child, local=keyword == "local")
            elif child.type == "variable_name":
                name = self._text(child.start_byte, child.end_byte)
            else:
                continue
            if export and name:
                self.vars.exported.add(name)
                self.vars.values.setdefault(name, "")

    def _command(self, node: Node, heredoc: Node | None) -> None:
        mark = len(self.unknown)
        prefix: dict[str, str] = {}
        argv: list[_Field] = []
        for child in node.named_children:
            if child.type == "variable_assignment" and not argv:
                kids = child.named_children
                name = self._text(kids[0].start_byte, kids[0].end_byte)
                prefix[name] = self.word(kids[1]).text if len(kids) > 1 else ""
            elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                continue
            elif child.type == "command_name":
                for sub in child.named_children:
                    argv += self.words(sub)
            else:
                argv += self.words(child)
        unknown = tuple(dict.fromkeys(self.unknown[mark:]))
        del self.unknown[mark:]
        if not argv:
            self.vars.values.update(prefix)
            return
        words = [f.text for f in argv]
        stdin = self._heredoc_script(heredoc)
        line = argv[0].rows[0] + 1 if argv[0].rows else self.row_of(node.start_byte) + 1
        self._run(words, argv, {**self.vars.environ(), **prefix}, line, unknown, stdin, image="", via=self.via)

    def _heredoc_script(self, heredoc: Node | None) -> _Field | None:
        if heredoc is None:
            return None
        body = next((c for c in heredoc.named_children if c.type == "heredoc_body"), None)
        start = next((c for c in heredoc.named_children if c.type == "heredoc_start"), None)
        if body is None:
            return None
        delimiter = self._text(start.start_byte, start.end_byte) if start is not None else ""
        if any(q in delimiter for q in "'\"\\"):  # a quoted delimiter: the body is literal
            f = _Field()
            f.add(self._text(body.start_byte, body.end_byte), self.row_of(body.start_byte))
            return f
        fields = [_Field()]
        self._string(body, fields, start=False)
        return fields[0]

    # -- what runs -------------------------------------------------------------------------------------------

    def _emit(self, argv: Sequence[str], env: Mapping[str, str], line: int, unknown: tuple[str, ...], image: str,
              via: tuple[str, ...], consumed: Sequence[str] = ()) -> None:
        # what stayed unknown in a launcher's own options (a docker -v mount) is not the command's
        kept = [*argv, *env.values()]
        unknown = tuple(u for u in unknown if any(u in w for w in kept) or not any(u in w for w in consumed))
        self.out.append(Command(tuple(argv), line, MappingProxyType(dict(env)), image, unknown, via, self.file))

    def _run(self, words: list[str], fields: list[_Field] | None, env: dict[str, str], line: int,
             unknown: tuple[str, ...], stdin: _Field | None, *, image: str, via: tuple[str, ...]) -> None:
        """Run ``words`` as the shell would: builtins, functions, launchers, shells, and then the command."""
        offset = 0  # index of words[0] in fields (for the rows of a ``-c`` string)
        consumed = list(words)
        while words:
            head = words[0].rsplit("/", 1)[-1]
            if head in self.vars.functions and self.depth < _MAX_DEPTH and not via:
                body, owner = self.vars.functions[head]  # its reader holds the text it was defined in
                saved, depth = self.vars.positional, owner.depth
                self.vars.positional = tuple(words[1:])
                owner.depth = self.depth + 1
                owner.walk(body)
                owner.depth = depth
                self.vars.positional = saved
                return
            if head in (".", "source") and len(words) > 1 and not via:
                found = self.files(words[1]) if self.files is not None else None
                if found is not None:  # the same shell reads it: its assignments and functions stay
                    saved = self.vars.positional
                    if len(words) > 2:
                        self.vars.positional = tuple(words[2:])
                    self._file(found, self.vars, via + (f"{head} {words[1]}",), image)
                    self.vars.positional = saved
                    return
            if head == "eval" and not via:
                text = " ".join(words[1:])
                self._nested(text, None, line, self.vars, via + ("eval",))
                return
            if head == "env":
                opts, k = L.split_options(words[1:], L.Options(valued=frozenset({"-u", "--unset", "-C", "--chdir",
                                                                                  "-S", "--split-string"})))
                for opt, value in opts:
                    if opt in ("-i", "--ignore-environment", "-"):
                        env = {}
                    elif opt in ("-u", "--unset") and value:
                        env.pop(value, None)
                    elif opt in ("-S", "--split-string") and value:
                        words = ["env", *shlex.split(value), *words[1 + k:]]
                        k = 0
                        break
                rest = words[1 + k:]
                while rest and _ASSIGN.match(rest[0]):
                    name, value = rest[0].split("=", 1)
                    env[name] = value
                    rest = rest[1:]
                offset += len(words) - len(rest)
                words, via = rest, via + ("env",)
                continue
            if head in _SHELLS:
                self._shell(words, fields, offset, env, line, unknown, stdin, image, via)
                return
            pair = next((key for key in L.SUBCOMMANDS if tuple(w.rsplit("/", 1)[-1] if i == 0 else w
                                                               for i, w in enumerate(words[:len(key)])) == key), None)
            if pair is not None:
                opts, k = L.split_options(words[len(pair):], L.SUBCOMMANDS[pair])
                rest = words[len(pair) + k:]
                if pair in L.IMAGE_FIRST or pair in L.CONTAINER_FIRST:
                    if not rest:
                        return
                    container_env: dict[str, str] = {}
                    entrypoint: list[str] = []
                    for opt, value in opts:
                        if opt in ("-e", "--env") and value:
                            name, eq, val = value.partition("=")
                            if eq:
                                container_env[name] = val
                            elif name in env:
                                container_env[name] = env[name]
                        elif opt == "--entrypoint" and value:
                            entrypoint = shlex.split(value)
                    if pair in L.IMAGE_FIRST:
                        image = rest[0]
                    env = container_env  # a container starts with its -e variables, not the host's
                    rest = entrypoint + rest[1:]
                elif pair in (("ray", "job", "submit"), ("kubectl", "exec"), ("oc", "exec")) and "--" in words:
                    rest = words[words.index("--") + 1:]
                elif pair == ("uv", "run") and any(o in ("-m", "--module") for o, _ in opts):
                    rest = ["python", "-m", *rest]
                offset += len(words) - len(rest)
                words, via = rest, via + (" ".join(pair),)
                if image and pair in L.IMAGE_FIRST and not words:
                    self._emit(words, env, line, unknown, image, via, consumed)
                    return
                continue
            if head in L.LAUNCHERS:
                spec = L.LAUNCHERS[head]
                opts, k = L.split_options(words[1:], spec)
                rest = words[1 + k + spec.positionals:]
                if head == "srun":
                    for opt, value in opts:
                        if opt == "--container-image" and value:
                            image = value
                        elif opt == "--export" and value:
                            items = value.split(",")
                            if "NONE" in items:
                                env = {}
                            for item in items:
                                key, eq, val = item.partition("=")
                                if eq:
                                    env[key] = val
                elif head in ("mpirun", "mpiexec", "orterun", "mpiexec.hydra"):
                    for opt, value in opts:
                        if opt in ("-x", "--x") and value and "=" in value:
                            env[value.split("=", 1)[0]] = value.split("=", 1)[1]
                        elif opt in ("-genv", "-env") and value and " " in value:
                            env[value.split(" ", 1)[0]] = value.split(" ", 1)[1]
                elif head == "torchrun":
                    flags = {o for o, _ in opts}
                    if not flags & {"--no-python", "--no_python"}:
                        rest = ["python", "-m", *rest] if flags & {"-m", "--module"} else ["python", *rest]
                elif head == "sudo":
                    keep = any(o in ("-E", "--preserve-env") for o, _ in opts)
                    env = env if keep else {}
                    while rest and _ASSIGN.match(rest[0]):
                        name, value = rest[0].split("=", 1)
                        env[name] = value
                        rest = rest[1:]
                elif head == "ssh":
                    if rest:
                        self._nested(" ".join(rest), None, line, self.vars.child({}, None), via + ("ssh",))
                    return
                offset += len(words) - len(rest)
                words, via = rest, via + (head,)
                continue
            if head.startswith("python") and len(words) > 2 and words[1] == "-m" \
                    and words[2] in ("torch.distributed.run", "torch.distributed.launch"):
                opts, k = L.split_options(words[3:], L.TORCHRUN)
                flags = {o for o, _ in opts}
                rest = words[3 + k:]
                words = ["python", "-m", *rest] if flags & {"-m", "--module"} else ["python", *rest]
                via = via + ("torchrun",)
                continue
            break
        if words:
            self._emit(words, env, line, unknown, image, via, consumed)

    def _shell(self, words: list[str], fields: list[_Field] | None, offset: int, env: dict[str, str], line: int,
               unknown: tuple[str, ...], stdin: _Field | None, image: str, via: tuple[str, ...]) -> None:
        """``bash -c STRING [arg0 args...]``, ``bash <<EOF``; ``bash script.sh`` is a command of its own."""
        i, has_c = 1, False
        while i < len(words):
            w = words[i]
            if w == "--":
                i += 1
                break
            if w.startswith(("-", "+")) and len(w) > 1:
                has_c = has_c or ("c" in w[1:] and not w.startswith("--"))
                if w[1:] == "o" or (not w.startswith("--") and w.endswith("o")):
                    i += 1  # -o pipefail
                i += 1
                continue
            break
        name = words[0].rsplit("/", 1)[-1]
        if has_c and i < len(words):
            positional = tuple(words[i + 2:])
            arg0 = words[i + 1] if i + 1 < len(words) else name
            child = self.vars.child(env, positional, arg0)
            string = fields[offset + i] if fields is not None and offset + i < len(fields) else None
            if string is not None and string.text != words[i]:
                string = None  # the words were rebuilt (torchrun, env -S): the rows are not known
            self._nested(words[i], string, line, child, via + (f"{name} -c",), image=image)
            return
        if i >= len(words) and stdin is not None:
            self._nested(stdin.text, stdin, line, self.vars.child(env, None, name), via + (f"{name} <<",),
                         image=image)
            return
        found = self.files(words[i]) if self.files is not None and i < len(words) else None
        if found is not None:  # ``bash serve.sh ARGS``: a child shell runs the script with its arguments
            self._file(found, self.vars.child(env, tuple(words[i + 1:]), words[i]), via + (f"{name} {words[i]}",),
                       image)
            return
        self._emit(words, env, line, unknown, image, via)

    def _file(self, found: tuple[str, str], shell: _Vars, via: tuple[str, ...], image: str) -> None:
        """Another script of the artifact, read by ``shell`` (this one's for ``source``, a child's for ``bash``);
        its commands carry its name and their lines in it."""
        text, name = found
        if self.depth >= _MAX_DEPTH:
            return
        src = text.encode("utf-8")
        starts = [0] + [i + 1 for i, byte in enumerate(src) if byte == 0x0A]

        def row_of(b: int) -> int:
            return bisect.bisect_right(starts, b) - 1

        found_cmds: list[Command] = []
        reader = _Reader(src, shell, found_cmds, self.problems, row_of, self.depth + 1, via, files=self.files,
                         file=name)
        root = _parse(src).root_node
        _problems(root, src, row_of, self.problems, name)
        reader.walk(root)
        self.out.extend(c if c.image or not image else replace(c, image=image) for c in found_cmds)

    def _nested(self, text: str, rows: _Field | None, line: int, shell: _Vars, via: tuple[str, ...], *,
                image: str = "") -> None:
        if self.depth >= _MAX_DEPTH:
            return
        src = text.encode("utf-8")
        if rows is not None and rows.rows and len(rows.rows) == len(text):
            starts = [0]
            for ch in text:
                starts.append(starts[-1] + len(ch.encode("utf-8")))
            char_rows = rows.rows

            def row_of(b: int) -> int:
                return char_rows[min(bisect.bisect_left(starts, b), len(char_rows) - 1)]
        else:
            def row_of(b: int) -> int:
                return line - 1

        found: list[Command] = []
        reader = _Reader(src, shell, found, self.problems, row_of, self.depth + 1, via, files=self.files,
                         file=self.file)
        root = _parse(src).root_node
        _problems(root, src, row_of, self.problems, self.file)
        reader.walk(root)
        if image:
            found = [c if c.image else replace(c, image=image) for c in found]
        self.out.extend(found)


def _parse(src: bytes) -> Tree:
    if not HAVE_GRAMMAR:
        raise InputError(MISSING_GRAMMAR)
    return _parser().parse(src)


def _problems(root: Node, src: bytes, row_of: Callable[[int], int], out: list[SyntaxProblem], file: str = "") -> None:
    """Each part of the tree the grammar could not read (``ERROR``) or had to invent (a missing ``fi``, an
    unclosed quote), with the whole line it starts on."""
    if not root.has_error:
        return
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            start = src.rfind(b"\n", 0, node.start_byte) + 1
            end = src.find(b"\n", node.end_byte if node.type == "ERROR" else node.start_byte)
            text = src[start:end if end >= 0 else len(src)].decode("utf-8", "replace")
            what = f"missing {node.type}" if node.is_missing else "cannot be read"
            out.append(SyntaxProblem(row_of(node.start_byte) + 1, f"{what}: {text[:300]}", file))
            continue
        stack.extend(reversed(node.children))


_PARSER: list[Parser] = []


def _parser() -> Parser:
    if not _PARSER:
        _PARSER.append(Parser(Language(tree_sitter_bash.language())))
    return _PARSER[0]


def read_script(text: str, env: Mapping[str, str] | None = None, *, positional: Sequence[str] | None = None,
                files: Files | None = None) -> Script:
    """The commands ``text`` runs, with ``env`` (exported) as the environment it starts in; ``files``: the other
    scripts of the artifact a ``source FILE`` / ``. FILE`` / ``bash FILE`` may name (read where it gives them)."""
    src = text.encode("utf-8")
    shell = _Vars(dict(env or {}), set(env or {}), tuple(positional) if positional is not None else None)
    out: list[Command] = []
    problems: list[SyntaxProblem] = []
    tree = _parse(src)
    starts = [0] + [i + 1 for i, byte in enumerate(src) if byte == 0x0A]

    def row_of(b: int) -> int:
        return bisect.bisect_right(starts, b) - 1

    _problems(tree.root_node, src, row_of, problems)
    reader = _Reader(src, shell, out, problems, row_of, 0, (), files=files)
    reader.walk(tree.root_node)
    return Script(tuple(out), tuple(problems))


def read_argv(argv: Sequence[str], env: Mapping[str, str] | None = None, *, files: Files | None = None) -> Script:
    """The commands an exec-form command line runs (a Kubernetes ``command`` + ``args``: no shell reads it, so
    nothing is expanded), launchers unwrapped and ``sh -c`` strings read as scripts."""
    shell = _Vars(dict(env or {}), set(env or {}), None)
    out: list[Command] = []
    problems: list[SyntaxProblem] = []
    reader = _Reader(b"", shell, out, problems, lambda b: 0, 0, (), files=files)
    fields = []
    for word in argv:
        f = _Field()
        f.add(word, 0)
        fields.append(f)
    reader._run(list(argv), fields, dict(env or {}), 1, (), None, image="", via=())
    return Script(tuple(out), tuple(problems))
