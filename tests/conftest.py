"""Shared test configuration: pytester for the plugin's own tests, and the builders every test module
uses (``builders.py``: machines, deployments, model specs) importable from any test directory, and a model
resolution that never leaves this machine: no Hub (offline, and an endpoint on a closed local port should
anything ask), and a Hugging Face cache of the suite's own rather than the developer's."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# numpy (under gguf) cannot be imported twice in one process: loaded here, before the in-process pytester runs
# snapshot sys.modules, it stays; first loaded inside one, it is dropped after it and the next GGUF read fails
# "cannot load module more than once per process"
import gguf  # noqa: F401

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE / "fakes"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

# Set before anything imports huggingface_hub (it reads them once, at import) and inherited by the processes
# the tests start. The tests of the Hub itself serve one on 127.0.0.1 and say so (tests/model/hubserver.py).
for _var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GPULAYOUT_MODELS",
             "GPULAYOUT_MODEL_MAP", "TRANSFORMERS_OFFLINE"):
    os.environ.pop(_var, None)
os.environ.update({"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9",
                   "HF_HOME": str(Path(tempfile.gettempdir()) / f"gpulayout-tests-hf-home-{os.getuid()}")})
