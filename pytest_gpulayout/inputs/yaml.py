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


def load_yaml(text: str, where: str) -> object:
    """``yaml.safe_load`` plus the duplicate-key check; every YAML problem becomes one line."""
    import yaml

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
