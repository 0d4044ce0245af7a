"""TensorRT-LLM's release facts, each with the file of the repository it was read from.

The wheel is not on the public index, so the rules were read from the repository's source through the
code search tools (``NVIDIA/TensorRT-LLM``), at these commits:

* ``tensorrt_llm/_torch/pyexecutor/_util.py`` (``KvCacheCreator``), ``_torch/pyexecutor/resource_manager.py``
  (``KVCacheManager``), ``tensorrt_llm/mapping.py``: commit b35ac1b6, whose ``tensorrt_llm/version.py``
  says ``1.2.0rc2``.
* ``tensorrt_llm/llmapi/llm_args.py`` (``KvCacheConfig``) and ``tensorrt_llm/commands/serve.py``: the
  stored snapshot of the main branch (serve.py at commit 00209af1), a 1.x file whose exact release tag
  could not be pinned; the values used here (defaults 0.9 and 32, the flags) are the ones named in the
  1.2.0rc2 files above as well.

Releases before 1.0 served the TensorRT engine backend by default; only the PyTorch backend (the
default of ``trtllm-serve --backend`` in the files read) is modelled.
"""

from __future__ import annotations

from packaging.version import Version

#: newest release whose source the rules were read from (``tensorrt_llm/version.py`` at b35ac1b6)
LATEST_KNOWN = "1.2.0rc2"
#: the first release whose ``trtllm-serve`` defaults to the PyTorch backend (the one modelled)
PYTORCH_BACKEND_DEFAULT_FROM = Version("1.0")

#: ``serve.py``: ``--kv_cache_free_gpu_memory_fraction`` default 0.9; ``llm_args.py`` ``KvCacheConfig.
#: free_gpu_memory_fraction = Field(default=0.9)``
DEFAULT_FREE_GPU_MEMORY_FRACTION = 0.9
#: ``llm_args.py`` ``KvCacheConfig.tokens_per_block = Field(default=32)``
TOKENS_PER_BLOCK = 32
#: ``resource_manager.py`` ``KVCacheManager(..., max_num_tokens: int = 8192)``; ``serve.py`` takes
#: ``BuildConfig``'s default for ``--max_num_tokens``
DEFAULT_MAX_NUM_TOKENS = 8192

#: ``llm_args.py`` ``KvCacheConfig.validate_free_gpu_memory_fraction`` (a pydantic ValueError)
FRACTION_RANGE_TEXT = "kv_cache_config.free_gpu_memory_fraction must be a float between 0 and 1"
#: ``resource_manager.py`` ``KVCacheManager.calculate_max_num_blocks`` (an AssertionError)
FRACTION_BELOW_ONE_TEXT = "Invalid freeMemFraction, freeMemFraction {f} must be smaller than 1.0"

#: ``resource_manager.py`` ``_validate_and_adjust_attention_windows``: the warnings when the pool
#: cannot hold ``max_seq_len`` (it lowers the window and ``max_seq_len``, and starts)
WINDOW_REDUCED_TEXT = ("Attention window size {w} exceeds upper bound {u} for available blocks. "
                       "Reducing to {u}.")
SEQ_LEN_LOWERED_TEXT = "Adjusted max_seq_len to {n}"
#: ``serve.py``: the flag that turns the lowering into a start-up error
FAIL_FAST_FLAG = "--fail_fast_on_attention_window_too_large"
#: ``resource_manager.py get_max_atten_window_upper_bound``: not even one block per sequence
NO_SEQUENCE_TEXT = "Impossible to fit in any sequence in kvCache"


def default_fraction(version: Version) -> float:
    """``free_gpu_memory_fraction`` when none is given: 0.9 in every 1.x file read."""
    return DEFAULT_FREE_GPU_MEMORY_FRACTION
