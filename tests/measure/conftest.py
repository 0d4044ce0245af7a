"""The real-engine measure tests' model: the tiny Llama (config.json only: vLLM loads dummy weights)
with a word-level tokenizer (its vocabulary's size in words) made with ``tokenizers`` from the
engine's environment, so ``vllm bench serve`` and the server tokenize offline."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from real_engines import vllm_python

TINY_DIR = Path(__file__).parents[1] / "data" / "models" / "tiny-llama"

MAKE_TOKENIZER = """
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
out, n = Path(sys.argv[1]), int(sys.argv[2])
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, n)}}
tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##")
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "model_max_length": 2048}))
"""


@pytest.fixture
def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    python = vllm_python()
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(tmp_path / "locks"))
    model = tmp_path / f"tiny-llama-{uuid.uuid4().hex[:8]}"  # a unique path to find leftovers by
    shutil.copytree(TINY_DIR, model)
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    subprocess.run([python, "-c", MAKE_TOKENIZER, str(model), str(vocab)], check=True, timeout=120)
    return model

