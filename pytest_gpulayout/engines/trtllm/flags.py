"""``trtllm-serve serve`` flags and the ``--extra_llm_api_options`` YAML, read from ``launch.args``.

Flags (``tensorrt_llm/commands/serve.py``, click options with ``_`` spellings): ``--tp_size`` /
``--tensor_parallel_size``, ``--pp_size``, ``--cp_size``, ``--ep_size`` /
``--moe_expert_parallel_size``, ``--cluster_size``, ``--kv_cache_free_gpu_memory_fraction`` /
``--free_gpu_memory_fraction``, ``--max_batch_size``, ``--max_num_tokens``, ``--max_seq_len``,
``--backend``, ``--config`` / ``--extra_llm_api_options`` (a YAML file).

``serve.py`` builds the LLM arguments from the flags and then applies the YAML on top
(``update_llm_args_with_extra_dict``): the YAML overrides the flags, so it is read last here too. What the
manifest owns (TP, PP, ``max_model_len``, ``memory_fraction``) is refused in the YAML
as it is in ``launch.args``: the launch would otherwise run another layout than the one judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import not_regular, read_text
from pytest_gpulayout.inputs.yaml import check_shape
from pytest_gpulayout.knobs import KnobFlag, LaunchKnobs, read_knobs

#: flags the checks model (``LaunchKnobs`` fields)
KNOB_FLAGS: Mapping[str, KnobFlag] = {
    "--max_num_tokens": KnobFlag("max_num_batched_tokens"),
    "--max_batch_size": KnobFlag("max_num_seqs"),
}
#: flags read by ``parallel_sizes`` (the Mapping rules), not by the memory knobs
PARALLEL_FLAGS: Mapping[str, str] = {
    "--ep_size": "ep", "--moe_expert_parallel_size": "ep",
    "--cluster_size": "cluster", "--moe_cluster_parallel_size": "cluster",
    "--cp_size": "cp", "--context_parallel_size": "cp",
}
YAML_FLAGS = ("--extra_llm_api_options", "--config")
NEUTRAL_FLAGS = frozenset({
    "--tokenizer", "--custom_tokenizer", "--log_level", "--max_beam_width", "--gpus_per_node",
    "--num_postprocess_workers", "--trust_remote_code", "--revision", "--reasoning_parser", "--tool_parser",
    "--chat_template", "--enable_chunked_prefill", "--backend", "--otlp_traces_endpoint", "--media_io_kwargs",
    "--fail_fast_on_attention_window_too_large", *PARALLEL_FLAGS, *YAML_FLAGS,
})
VALUE_FLAGS = frozenset({
    "--tokenizer", "--custom_tokenizer", "--log_level", "--max_beam_width", "--gpus_per_node",
    "--num_postprocess_workers", "--revision", "--reasoning_parser", "--tool_parser", "--chat_template",
    "--backend", "--otlp_traces_endpoint", "--media_io_kwargs", "--metadata_server_config_file",
    "--server_role", "--disagg_cluster_uri", "--custom_module_dirs", *PARALLEL_FLAGS, *YAML_FLAGS,
})

#: YAML keys the manifest owns, and the manifest key to use instead
YAML_OWNED: Mapping[str, str] = {
    "tensor_parallel_size": "tensor_parallel_size", "pipeline_parallel_size": "pipeline_parallel_size",
    "max_seq_len": "max_model_len", "kv_cache_config.free_gpu_memory_fraction": "memory_fraction",
}
#: YAML keys that set a knob (``llm_args.py`` field -> ``LaunchKnobs`` field)
YAML_KNOBS: Mapping[str, str] = {
    "max_num_tokens": "max_num_batched_tokens",
    "max_batch_size": "max_num_seqs",
    "kv_cache_config.tokens_per_block": "block_size",
    "kv_cache_config.max_gpu_total_bytes": "kv_cache_memory_bytes",
}
YAML_PARALLEL: Mapping[str, str] = {
    "moe_expert_parallel_size": "ep", "moe_cluster_parallel_size": "cluster", "context_parallel_size": "cp",
}
#: YAML keys that change nothing the checks judge
YAML_NEUTRAL = frozenset({
    "kv_cache_config.enable_block_reuse", "trust_remote_code", "print_iter_log", "enable_iter_perf_stats",
    "return_perf_metrics", "stream_interval", "backend", "kv_cache_config.dtype", "load_format",
})


@dataclass(frozen=True)
class ParallelSizes:
    """What ``Mapping`` is built from besides TP and PP (None: not given, TensorRT-LLM's default)."""

    ep: int | None = None
    cluster: int | None = None
    cp: int | None = None
    fail_fast: bool = False


def _flag_value(args: Sequence[str], names: Sequence[str]) -> str | None:
    """The last value given to any of ``names`` (``--flag value`` or ``--flag=value``)."""
    found: str | None = None
    for i, token in enumerate(args):
        name, eq, inline = token.partition("=")
        if name in names:
            if eq:
                found = inline
            elif i + 1 < len(args):
                found = args[i + 1]
    return found


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and key == "kv_cache_config":
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def read_yaml(args: Sequence[str], base_dir: Path | None = None) -> tuple[dict[str, Any], str | None]:
    """The ``--extra_llm_api_options`` YAML flattened (``kv_cache_config.x``), and a note when the file
    named cannot be read here ({} and None without the flag)."""
    path_text = _flag_value(args, YAML_FLAGS)
    if path_text is None:
        return {}, None
    import yaml  # only when a launch names the file: importing the engine must not load YAML

    path = Path(path_text).expanduser()
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        path = base_dir / path
    try:
        text = read_text(path)
    except InputError as err:
        if not_regular(path) is not None:  # a FIFO or a device is bad input, not "not here"
            raise InputError(f"--extra_llm_api_options {path_text}: {err}", key="launch.args") from None
        return {}, f"--extra_llm_api_options {path_text} (not readable here)"
    check_shape(text, f"--extra_llm_api_options {path_text}")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(f"--extra_llm_api_options {path_text} is not valid YAML: {err}",
                         key="launch.args") from None
    if data is None:
        return {}, None
    if not isinstance(data, Mapping):
        raise InputError(f"--extra_llm_api_options {path_text} must hold a mapping of LLM API options",
                         key="launch.args")
    return _flatten(data), None


def _int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{key} in --extra_llm_api_options needs a whole number, not {value!r}",
                         key="launch.args")
    return value


def knobs(args: Sequence[str], env: Mapping[str, str], base_dir: Path | None = None) -> LaunchKnobs:
    """The flags (``KNOB_FLAGS``), then the YAML on top (it overrides them, as in ``serve.py``)."""
    k = read_knobs(args, env, flags=KNOB_FLAGS, neutral=NEUTRAL_FLAGS, value_flags=VALUE_FLAGS,
                   env_knobs={})
    data, unread = read_yaml(args, base_dir)
    values: dict[str, Any] = {}
    not_modelled = list(k.not_modelled)
    if unread:
        not_modelled.append(unread)
    for key, value in data.items():
        if key in YAML_OWNED:
            raise InputError(f"{key} in --extra_llm_api_options sets what the manifest's "
                             f"{YAML_OWNED[key]} owns: set {YAML_OWNED[key]} in the deployment instead",
                             key="launch.args")
        if key in YAML_KNOBS:
            values[YAML_KNOBS[key]] = _int(key, value)
        elif key not in YAML_PARALLEL and key not in YAML_NEUTRAL:
            not_modelled.append(f"extra_llm_api_options:{key}")
    return replace(k, **values, env=MappingProxyType(dict(env)), not_modelled=tuple(dict.fromkeys(not_modelled)))


def parallel_sizes(args: Sequence[str], base_dir: Path | None = None) -> ParallelSizes:
    """``--ep_size`` / ``--cluster_size`` / ``--cp_size`` and their YAML keys (the YAML wins)."""
    found: dict[str, int] = {}
    for flag, what in PARALLEL_FLAGS.items():
        value = _flag_value(args, (flag,))
        if value is not None:
            try:
                found[what] = int(value)
            except ValueError:
                raise InputError(f"{flag} needs a whole number, not {value!r}", key="launch.args") from None
    data, _ = read_yaml(args, base_dir)
    for key, what in YAML_PARALLEL.items():
        if data.get(key) is not None:
            found[what] = _int(key, data[key])
    fail_fast = any(a.partition("=")[0] == "--fail_fast_on_attention_window_too_large" for a in args) \
        or bool(data.get("fail_fast_on_attention_window_too_large"))
    return ParallelSizes(found.get("ep"), found.get("cluster"), found.get("cp"), fail_fast)
