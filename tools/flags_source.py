"""A released Python package's sources, read as text: a wheel (``zipfile``) or an unpacked folder, its modules
parsed with ``ast`` on demand and its names resolved through its own imports. Nothing is imported or run.

Used by ``tools/engine_flags.py`` (``flags_eval.py`` evaluates the parser-building functions over it).
"""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path


class Sources:
    """The ``.py`` members of a wheel file or of a folder holding an unpacked wheel."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._zip: zipfile.ZipFile | None = None
        if self.path.is_dir():
            self.names = {str(p.relative_to(self.path)) for p in self.path.rglob("*.py")}
            marker = self.path / ".wheel"
            self.wheel = marker.read_text().strip() if marker.exists() else self.path.name
        else:
            self._zip = zipfile.ZipFile(self.path)
            self.names = {n for n in self._zip.namelist() if n.endswith(".py")}
            self.wheel = self.path.name
        self._trees: dict[str, ast.Module] = {}
        self.read: list[str] = []  # members parsed, in order (recorded in the table)

    def has(self, member: str) -> bool:
        return member in self.names

    def text(self, member: str) -> str:
        if self._zip is not None:
            return self._zip.read(member).decode("utf-8")
        return (self.path / member).read_text(encoding="utf-8")

    def tree(self, member: str) -> ast.Module:
        if member not in self._trees:
            self._trees[member] = ast.parse(self.text(member), filename=member)
            self.read.append(member)
        return self._trees[member]

    def module_file(self, module: str) -> str | None:
        """``vllm.config.model`` -> ``vllm/config/model.py`` (or the package's ``__init__.py``)."""
        base = module.replace(".", "/")
        for cand in (f"{base}.py", f"{base}/__init__.py"):
            if cand in self.names:
                return cand
        return None

    @staticmethod
    def module_of(member: str) -> str:
        mod = member[:-3].replace("/", ".")
        return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod

    def find_class(self, name: str, prefix: str) -> list[str]:
        """Members under ``prefix`` that define a top-level class ``name`` (a fallback for names the imports
        do not reach, e.g. ones imported inside ``if TYPE_CHECKING``)."""
        out = []
        for member in sorted(self.names):
            if member.startswith(prefix) and f"class {name}" in self.text(member):
                out.append(member)
        return out
