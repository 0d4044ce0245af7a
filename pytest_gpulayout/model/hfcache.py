"""The Hugging Face cache on this machine, read the way ``huggingface_hub`` lays it out.

Where it is (``huggingface_hub/constants.py``): ``HF_HUB_CACHE``, else the legacy ``HUGGINGFACE_HUB_CACHE``,
else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``; each value
goes through ``~`` and ``$VAR`` expansion there too. Inside it (``file_download.py``, ``try_to_load_from_cache``):
``models--<org>--<name>/refs/<branch>`` holds the commit a branch (or tag) pointed at when it was fetched,
``snapshots/<commit>/<file>`` the files fetched at that commit, and ``.no_exist/<commit>/<file>`` marks a
file the Hub said is not in the repository.

Read here without importing ``huggingface_hub`` (its download module costs a third of a second to import:
an offline check should not pay it): a few path look-ups, the same ones ``try_to_load_from_cache`` makes,
plus one it does not: a pinned revision written as a commit prefix (``@0a1b2c3``) names the one snapshot
that starts with it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_COMMIT = re.compile(r"[0-9a-f]{40}")
_PREFIX = re.compile(r"[0-9a-f]{7,39}")


def _expand(value: str, environ: Mapping[str, str]) -> Path:
    """``~`` and ``$VAR`` expanded against ``environ`` (not the process's), as ``os.path.expandvars`` would."""
    expanded = re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: environ.get(m.group(1) or m.group(2), m.group(0)), value)
    if expanded.startswith("~"):
        home = environ.get("HOME")
        expanded = (home + expanded[1:]) if home and expanded[:2] in ("~", "~/") else os.path.expanduser(expanded)
    return Path(expanded)


def hub_cache_dir(environ: Mapping[str, str]) -> Path:
    """The Hub cache folder ``huggingface_hub`` (and so vLLM, SGLang, Transformers) reads under ``environ``."""
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if environ.get(key):
            return _expand(environ[key], environ)
    if environ.get("HF_HOME"):
        return _expand(environ["HF_HOME"], environ) / "hub"
    xdg = environ.get("XDG_CACHE_HOME")
    base = _expand(xdg, environ) if xdg else _expand("~", environ) / ".cache"
    return base / "huggingface" / "hub"


def repo_folder(cache: Path, repo_id: str) -> Path:
    """``models--org--name`` (``file_download.repo_folder_name``)."""
    return cache / ("models--" + repo_id.replace("/", "--"))


@dataclass(frozen=True)
class Snapshot:
    """One cached revision of a model repository."""

    repo_id: str
    commit: str
    folder: Path       # snapshots/<commit>
    #: what the revision was asked as (``main``, a tag, a commit or its prefix)
    revision: str

    def has(self, filename: str) -> bool:
        return (self.folder / filename).is_file()

    def known_missing(self, filename: str) -> bool:
        """Whether the Hub said ``filename`` is not in this revision (``.no_exist``), so asking again is moot."""
        return (self.folder.parent.parent / ".no_exist" / self.commit / filename).is_file()


def _read_ref(repo: Path, revision: str) -> str | None:
    ref = repo / "refs" / revision
    try:
        text = ref.read_text(encoding="utf-8").strip() if ref.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def find_snapshot(cache: Path, repo_id: str, revision: str | None = None) -> Snapshot | None:
    """The cached snapshot of ``repo_id`` at ``revision`` (default ``main``) that holds a ``config.json``, or None.

    A branch or tag resolves through ``refs/``; a full commit names its snapshot; a commit prefix names the
    one snapshot it starts (two or more: None, the prefix is ambiguous)."""
    repo = repo_folder(cache, repo_id)
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    asked = revision or "main"
    commit = _read_ref(repo, asked)
    if commit is None and _COMMIT.fullmatch(asked):
        commit = asked
    if commit is None and _PREFIX.fullmatch(asked):
        try:
            starts = [p.name for p in snapshots.iterdir() if p.name.startswith(asked)]
        except OSError:
            starts = []
        commit = starts[0] if len(starts) == 1 else None
    if commit is None:
        return None
    folder = snapshots / commit
    if not (folder / "config.json").is_file():
        return None
    return Snapshot(repo_id, commit, folder, asked)


def weights_record(facts_dir: Path, repo_id: str, commit: str) -> Path:
    """Where the checkpoint bytes of a single-file repository fetched at ``commit`` are kept."""
    return facts_dir / ("models--" + repo_id.replace("/", "--")) / f"{commit}.json"


def read_weights_record(facts_dir: Path, repo_id: str, commit: str) -> int | None:
    path = weights_record(facts_dir, repo_id, commit)
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    total = data.get("weight_bytes") if isinstance(data, dict) else None
    return total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None


def write_weights_record(facts_dir: Path, repo_id: str, commit: str, total: int) -> None:
    path = weights_record(facts_dir, repo_id, commit)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"repo_id": repo_id, "commit": commit, "weight_bytes": total}), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a cache that cannot be written costs the next run one request, nothing else
