"""``gpulayout plan --measure --launch FILE``: how every measured layout is launched (a manifest ``launch:``
block: ``command``, ``args``, ``env``, ``timeout_s``, ``dummy_weights``) and, optionally, the load
(a ``measure:`` block), in a YAML file of their own::

    launch:
      command: [/venv/bin/python, -m, vllm.entrypoints.openai.api_server]
      args: [--enforce-eager]
      env: {VLLM_CPU_KVCACHE_SPACE: "1"}
      timeout_s: 600
    measure: {concurrency: 8, requests: 32}

A file holding only the launch block's keys is read as that block. Both blocks are checked exactly as
a manifest's ``defaults`` are (``manifest/load.py``), and an error names this file and the key as it is
written in it (``launch.args``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import read_text
from pytest_gpulayout.inputs.values import Ctx, describe
from pytest_gpulayout.inputs.yaml import load_yaml
from pytest_gpulayout.manifest.keys import LAUNCH_KEYS, check_keys
from pytest_gpulayout.manifest.load import parse_manifest

SECTIONS = ("launch", "measure")


def read_launch_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``launch`` and ``measure`` blocks of ``path``, as written (checked; empty where absent)."""
    where = str(path)
    data = load_yaml(read_text(path), where)
    ctx = Ctx(where)
    if not isinstance(data, Mapping) or not data:
        ctx.fail("", f"must be a mapping with a 'launch:' block (command, args, env, timeout_s), not {describe(data)}")
    if not any(k in SECTIONS for k in data) and all(k in LAUNCH_KEYS for k in data):
        data = {"launch": dict(data)}   # the launch block's keys alone
    check_keys(ctx, data, SECTIONS, {}, "", section="launch file")
    launch, load = data.get("launch") or {}, data.get("measure") or {}
    probe = {"version": 1, "defaults": {"launch": launch, "measure": load},
             "deployments": {"layout": {"model": "launch-file-check"}}}
    try:
        parse_manifest(probe, path=path, where=where)
    except InputError as err:   # keys as this file writes them: launch.args, not defaults.launch.args
        key = err.key[len("defaults."):] if err.key and err.key.startswith("defaults.") else err.key
        raise InputError(err.message, where=err.where, key=key) from None
    load = dict(load)
    for k in ("trace", "tokenizer", "python"):   # relative to this file, as a manifest's are to the manifest
        value = load.get(k)
        if isinstance(value, str) and (k != "python" or "/" in value) and not Path(value).expanduser().is_absolute():
            load[k] = str((path.parent / value).resolve())
    return dict(launch), load
