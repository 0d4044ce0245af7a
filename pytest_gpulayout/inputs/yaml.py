"""The one strict YAML loader: ``yaml.safe_load`` that refuses duplicate keys (naming both lines) and
extra documents, and turns every YAML problem into one line with its line and column.

YAML is imported inside the functions, so importing this module costs nothing at pytest start-up.
"""

from __future__ import annotations

from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.values import one_line


class _DuplicateKey(Exception):
    def __init__(self, dotted: str, key: str, line: int, first_line: int):
        super().__init__(dotted)
        self.dotted, self.key, self.line, self.first_line = dotted, key, line, first_line


def _check_duplicates(node: Any, path: str = "", seen_nodes: set[int] | None = None) -> None:
    """Refuse two equal keys in one mapping, naming the dotted key and both lines.

    Plain YAML keeps the last of two equal keys, so two deployments pasted under one name would
    silently become one (and the first would never be checked). This walks the composed node tree,
    before construction, where the line numbers still exist.
    """
    import yaml

    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:  # an alias to a node already walked (anchors may recurse)
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first_line: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # '<<: *base' keys are meant to be overridden
                continue
            if isinstance(key_node, yaml.ScalarNode):
                ident = (key_node.tag, key_node.value)
                dotted = f"{path}.{key_node.value}" if path else key_node.value
                line = key_node.start_mark.line + 1
                if ident in first_line:
                    raise _DuplicateKey(dotted, key_node.value, line, first_line[ident])
                first_line[ident] = line
            else:
                dotted = path
            _check_duplicates(value_node, dotted, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicates(item, f"{path}[{i}]", seen_nodes)


#: nesting past this is refused before the document is composed (PyYAML's composer, and every walk of
#: the result, recurse: 20,000 nested maps were a RecursionError traceback); the deepest real manifests,
#: snapshots and Kubernetes objects nest under 20 levels
MAX_DEPTH = 100
#: values (scalars and collections) a document may hold with its aliases expanded: a "billion laughs"
#: document of a few hundred bytes expands to billions, and every walk of it would take hours
MAX_VALUES = 200_000


def check_shape(text: str, where: str) -> None:
    """Refuse, in one line naming the file and the line, a YAML document nested past ``MAX_DEPTH``, one
    whose aliases expand it past ``MAX_VALUES`` values, and an alias inside the node it names (a
    recursive structure: ``&d {x: *d}``, ``&r [*r]``, which no walk ends). One pass over the parser's
    events, which PyYAML produces without recursion; a syntax error is left to the loader to say."""
    import yaml

    stack: list[list[Any]] = []          # per open collection: [its anchor, the values it holds so far]
    sizes: dict[str, int] = {}           # anchor -> the values of the node it names, aliases expanded
    total = 0
    # libyaml's parser where PyYAML has it: the pure-Python scanner looks up to 1,024 characters ahead
    # for a flow collection's possible key, at a cost per open level (0.8 s for 2,000 nested lists)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        for event in yaml.parse(text, Loader=loader):
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            if isinstance(event, yaml.CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise InputError(f"nested more than {MAX_DEPTH} levels deep (at line {line}); no manifest, "
                                     f"snapshot or Kubernetes object nests more than a few dozen: is it really "
                                     f"what was meant?", where=where)
                stack.append([event.anchor, 1])
                continue
            if isinstance(event, yaml.CollectionEndEvent):
                anchor, n = stack.pop()
                if anchor is not None:
                    sizes[anchor] = n
            elif isinstance(event, yaml.ScalarEvent):
                n = 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif isinstance(event, yaml.AliasEvent):
                if any(frame[0] == event.anchor for frame in stack):
                    raise InputError(f"the alias *{event.anchor} at line {line} is inside the node &{event.anchor} "
                                     f"it names: a structure that contains itself has no end to read; write the "
                                     f"values out", where=where)
                n = sizes.get(str(event.anchor), 1)  # an unknown anchor: the loader says so
            else:
                continue
            if stack:
                stack[-1][1] += n
            else:
                total += n
            if n > MAX_VALUES or total > MAX_VALUES or (stack and stack[-1][1] > MAX_VALUES):
                raise InputError(f"its aliases expand it to more than {MAX_VALUES:,} values (at line {line}: a "
                                 f"'billion laughs' document?); write the values out, or alias less", where=where)
    except yaml.YAMLError as err:
        if "maximum nesting depth" in str(err):  # libyaml's own limit (1,000 levels), met while it looks ahead
            mark = getattr(err, "problem_mark", None)
            at = f" (at line {mark.line + 1})" if mark is not None else ""
            raise InputError(f"nested more than {MAX_DEPTH} levels deep{at}; no manifest, snapshot or Kubernetes "
                             f"object nests more than a few dozen: is it really what was meant?", where=where) from None
        return  # a syntax error: the loader says it, with its line


def load_yaml(text: str, where: str) -> object:
    """``yaml.safe_load`` plus the duplicate-key check; every YAML problem becomes one line, and a document
    too deep, recursive or expanding past reason is refused before it is composed (``check_shape``)."""
    import yaml

    check_shape(text, where)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_duplicates(node)
        return loader.construct_document(node)
    except _DuplicateKey as err:
        raise InputError(
            f"duplicate key {err.key!r} at line {err.line} (first at line {err.first_line}); "
            "YAML would silently keep only the last one, so rename or remove one",
            where=where, key=err.dotted,
        ) from None
    except yaml.composer.ComposerError as err:
        if err.problem == "but found another document" and err.problem_mark is not None:
            raise InputError(f"only one YAML document is allowed, but a second one starts at line "
                             f"{err.problem_mark.line + 1}; remove the extra '---'", where=where) from None
        raise InputError(_yaml_message(err), where=where) from None
    except yaml.MarkedYAMLError as err:
        raise InputError(_yaml_message(err), where=where) from None
    except yaml.YAMLError as err:
        raise InputError(one_line(f"invalid YAML: {err}"), where=where) from None
    finally:
        loader.dispose()


def _yaml_message(err: Any) -> str:
    """``invalid YAML at line L, column C: problem (context that starts at line K)``."""
    mark = err.problem_mark or err.context_mark
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = err.problem or err.context or "syntax error"
    context = ""
    if err.context and err.problem:
        context = f" ({err.context}"
        if err.context_mark is not None and mark is not None and err.context_mark.line != mark.line:
            context += f" that starts at line {err.context_mark.line + 1}"
        context += ")"
    return one_line(f"invalid YAML{at}: {what}{context}")
