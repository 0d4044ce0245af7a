"""The manifest as a user writes it: what loads, what each value becomes, and what a mistake says.

Every bad-input test checks what the user reads: the file, the dotted key and the hint are in the
message, and the message is one line (the CLI prints it as is, after ``gpulayout:``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_gpulayout.engines.registry import ENGINE_KV_CACHE_DTYPES
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.manifest.load import find_manifest, load_manifest, parse_manifest

DESIGN_EXAMPLE = """\
version: 1
machine: auto            # auto = live NVML | path to a snapshot (.yaml/.json) or topo -m text | preset:<name>
defaults:                # optional; merged under every deployment
  engine: vllm
deployments:
  qwen3-8b-tp2:                          # name: unique, used in test ids
    model: ./models/Qwen3-8B             # dir holding config.json | a config.json | catalog id
    engine: vllm                         # vllm | sglang
    gpus: [0, 1]                         # CUDA indices or GPU UUIDs; default: the first tp*pp*dp visible
    tensor_parallel_size: 2
    pipeline_parallel_size: 1
    data_parallel_size: 1
    max_model_len: 8192                  # SGLang: --context-length
    memory_fraction: 0.90                # vLLM --gpu-memory-utilization / SGLang --mem-fraction-static
    kv_cache_dtype: auto                 # auto | fp8 | fp8_e4m3 | fp8_e5m2 | bf16 ...
    require:
      kv_tokens: 65536                   # pool must hold at least this many tokens
      concurrency: 8                     # or: this many full-length (max_model_len) requests
      tp_links: [nvlink]                 # link kinds allowed inside a TP group (default policy otherwise)
      balance_headroom_gib: 1.0          # margin demanded above SGLang's 0.9 rule
    launch:
      enabled: false
      command: [vllm, serve]             # default per engine; any argv (another venv's python -m ...)
      args: [--enforce-eager]            # extra engine flags
      env: {}
      timeout_s: 900
"""


def write(directory: Path, text: str, name: str = "gpulayout.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def one_deployment(body: str, *, extra_top: str = "") -> str:
    """A manifest with one deployment ``d`` whose keys are ``body`` (YAML, at deployment level)."""
    indented = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return f"version: 1\n{extra_top}deployments:\n  d:\n{indented}\n"


def load_one(tmp_path: Path, body: str):
    """Load a one-deployment manifest and return that deployment."""
    return load_manifest(write(tmp_path, one_deployment(body))).deployments[0]


def error_of(tmp_path: Path, text: str) -> tuple[Path, str]:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_manifest(path)
    message = str(info.value)
    assert "\n" not in message, f"message must be one line: {message!r}"
    assert "Traceback" not in message
    return path, message


def assert_error(tmp_path: Path, text: str, key: str | None, *hints: str) -> str:
    path, message = error_of(tmp_path, text)
    assert message.startswith(f"{path}: "), message
    if key is not None:
        assert f": {key}: " in message, message
    for hint in hints:
        assert hint in message, message
    return message


# ------------------------------------------------------------------------------------------------
# What loads, and what it becomes
# ------------------------------------------------------------------------------------------------
def test_design_example_loads_with_every_value(tmp_path):
    path = write(tmp_path, DESIGN_EXAMPLE)
    manifest = load_manifest(path)

    assert manifest.path == path
    assert manifest.base_dir == tmp_path
    assert manifest.machine == "auto"
    assert manifest.names == ("qwen3-8b-tp2",)
    dep = manifest.deployment("qwen3-8b-tp2")
    assert dep.model == str(tmp_path / "models" / "Qwen3-8B")
    assert dep.engine == "vllm"
    assert dep.gpus == (0, 1)
    assert (dep.tp, dep.pp, dep.dp) == (2, 1, 1)
    assert dep.max_model_len == 8192
    assert dep.memory_fraction == pytest.approx(0.90)
    assert dep.kv_cache_dtype == "auto"
    assert dep.engine_version is None
    assert dep.require.kv_tokens == 65536
    assert dep.require.concurrency == 8
    assert dep.require.tp_links == ("NV",)
    assert dep.require.balance_headroom_gib == 1.0
    assert dep.launch.enabled is False
    assert dep.launch.command == ("vllm", "serve")
    assert dep.launch.args == ("--enforce-eager",)
    assert dict(dep.launch.env) == {}
    assert dep.launch.timeout_s == 900.0
    assert dep.launch.dummy_weights is True
    assert dep.base_dir == tmp_path
    assert dep.manifest_path == path


def test_minimal_manifest_takes_documented_defaults(tmp_path):
    manifest = load_manifest(write(tmp_path, "version: 1\ndeployments:\n  q: {model: Qwen/Qwen3-8B}\n"))
    dep = manifest.deployments[0]
    assert manifest.machine == "auto"
    assert dep.model == "Qwen/Qwen3-8B"                     # catalog id: kept as written
    assert (dep.engine, dep.tp, dep.pp, dep.dp, dep.gpus) == ("vllm", 1, 1, 1, None)
    assert (dep.max_model_len, dep.memory_fraction, dep.kv_cache_dtype) == (None, None, "auto")
    assert dep.require.tp_links is None and dep.require.kv_tokens is None
    assert dep.launch.enabled is False and dep.launch.command is None and dep.launch.dummy_weights is True


def test_deployments_keep_file_order(tmp_path):
    text = "version: 1\ndeployments:\n" + "".join(f"  {n}: {{model: m}}\n" for n in ("zeta", "alpha", "mid"))
    assert load_manifest(write(tmp_path, text)).names == ("zeta", "alpha", "mid")


def test_defaults_merge_under_every_deployment(tmp_path):
    manifest = load_manifest(write(tmp_path, """\
        version: 1
        defaults:
          engine: sglang
          model: Qwen/Qwen3-8B
          max_model_len: 4096
          require: {kv_tokens: 1000, tp_links: [PHB]}
          launch:
            timeout_s: 60
            args: [--enforce-eager]
            env: {A: "1", B: "2"}
        deployments:
          inherit: {tensor_parallel_size: 2}
          override:
            engine: vllm
            max_model_len: null
            require: {concurrency: 4}
            launch:
              args: [--disable-log-stats]
              env: {B: "3", C: "4"}
    """))
    inherit, override = manifest.deployments

    assert (inherit.engine, inherit.model, inherit.max_model_len, inherit.tp) == (
        "sglang", "Qwen/Qwen3-8B", 4096, 2)
    assert inherit.require.kv_tokens == 1000 and inherit.require.tp_links == ("PHB",)
    assert inherit.launch.timeout_s == 60 and inherit.launch.args == ("--enforce-eager",)
    assert dict(inherit.launch.env) == {"A": "1", "B": "2"}

    assert override.engine == "vllm"
    assert override.max_model_len is None                      # null: back to the model's own length
    # require and launch merge key by key ...
    assert (override.require.kv_tokens, override.require.concurrency) == (1000, 4)
    assert override.require.tp_links == ("PHB",)
    assert override.launch.timeout_s == 60
    assert dict(override.launch.env) == {"A": "1", "B": "3", "C": "4"}
    # ... but lists are replaced as a whole
    assert override.launch.args == ("--disable-log-stats",)


def test_defaults_do_not_leak_between_deployments(tmp_path):
    manifest = load_manifest(write(tmp_path, """\
        version: 1
        defaults: {model: m, launch: {env: {A: "1"}}}
        deployments:
          first: {launch: {env: {B: "2"}}}
          second: {}
    """))
    first, second = manifest.deployments
    assert dict(first.launch.env) == {"A": "1", "B": "2"}
    assert dict(second.launch.env) == {"A": "1"}


def test_empty_sections_are_empty(tmp_path):
    manifest = load_manifest(write(tmp_path, """\
        version: 1
        defaults:
        deployments:
          d:
            model: m
            require:
            launch:
              env:
              args:
    """))
    dep = manifest.deployments[0]
    assert dep.require.kv_tokens is None and dep.launch.args == () and dict(dep.launch.env) == {}


def test_yaml_merge_keys_work_and_explicit_keys_win(tmp_path):
    manifest = load_manifest(write(tmp_path, """\
        version: 1
        deployments:
          base: &base {model: m, tensor_parallel_size: 2, max_model_len: 4096}
          derived:
            <<: *base
            tensor_parallel_size: 1
    """))
    derived = manifest.deployment("derived")
    assert (derived.tp, derived.max_model_len) == (1, 4096)


# ------------------------------------------------------------------------------------------------
# Paths resolve against the manifest, not the working directory
# ------------------------------------------------------------------------------------------------
def test_relative_paths_resolve_against_manifest_dir_from_any_cwd(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "org" / "local-model").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(project, """\
        version: 1
        machine: snapshots/l4x2.yaml
        deployments:
          dot: {model: ./models/Qwen3-8B}
          parent: {model: ../shared/config.json}
          absolute: {model: /opt/models/llama}
          catalog: {model: Qwen/Qwen3-8B}
          local-dir: {model: org/local-model}
    """)
    monkeypatch.chdir(elsewhere)

    manifest = load_manifest(Path("..") / "project" / "gpulayout.yaml")

    assert manifest.path == project / "gpulayout.yaml"
    assert manifest.base_dir == project
    assert manifest.machine == "snapshots/l4x2.yaml"    # as written; load_machine resolves it vs base_dir
    models = {d.name: d.model for d in manifest.deployments}
    assert models == {
        "dot": str(project / "models" / "Qwen3-8B"),
        "parent": str(tmp_path / "shared" / "config.json"),
        "absolute": "/opt/models/llama",
        "catalog": "Qwen/Qwen3-8B",
        "local-dir": str(project / "org" / "local-model"),   # exists next to the manifest: a path
    }
    assert all(d.base_dir == project for d in manifest.deployments)


def test_home_relative_model_path_expands(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    dep = load_one(tmp_path, "model: ~/models/m")
    assert dep.model == str(tmp_path / "home" / "models" / "m")


def test_model_symlink_is_not_followed(tmp_path):
    """A Hugging Face snapshot's config.json is a symlink into blobs/: keep the name the user gave."""
    blob = tmp_path / "blobs" / "abc123"
    blob.parent.mkdir()
    blob.write_text("{}")
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / "config.json").symlink_to(blob)
    dep = load_one(tmp_path, "model: ./snap/config.json")
    assert dep.model == str(tmp_path / "snap" / "config.json")


def test_parse_manifest_uses_given_path_for_base_dir(tmp_path):
    data = {"version": 1, "deployments": {"d": {"model": "./m", "tensor_parallel_size": 2}}}
    manifest = parse_manifest(data, path=tmp_path / "sub" / "gpulayout.yaml")
    assert manifest.deployments[0].model == str(tmp_path / "sub" / "m")
    assert manifest.deployments[0].tp == 2
    with pytest.raises(InputError, match=r"^virtual\.yaml: deployments\.d\.tensor_parallel_size: "):
        parse_manifest({"version": 1, "deployments": {"d": {"model": "m", "tensor_parallel_size": 0}}},
                       path=tmp_path / "x.yaml", where="virtual.yaml")


# ------------------------------------------------------------------------------------------------
# Value normalisation
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("written", "expected"), [
    ("[nvlink]", ("NV",)),
    ("[NVLink, NV, nvswitch]", ("NV",)),
    ("[nv12, NV4]", ("NV12", "NV4")),
    ("[phb, Node, SOC, sys, net]", ("PHB", "NODE", "SYS", "NET")),
    ("[NVLink, PIX, PXB]", ("NV", "PIX", "PXB")),
])
def test_tp_links_normalise_to_canonical_kinds(tmp_path, written, expected):
    dep = load_one(tmp_path, f"model: m\nrequire: {{tp_links: {written}}}")
    assert dep.require.tp_links == expected


def test_gpus_accept_indices_and_uuids(tmp_path):
    body = """\
        model: m
        tensor_parallel_size: 4
        gpus: [3, GPU-5b2c1f4e-aaaa-bbbb-cccc-0123456789ab, MIG-GPU-5b2c1f4e/1/0, MIG-8e1a2b3c-1111-2222]
    """
    dep = load_one(tmp_path, body)
    assert dep.gpus == (3, "GPU-5b2c1f4e-aaaa-bbbb-cccc-0123456789ab", "MIG-GPU-5b2c1f4e/1/0",
                        "MIG-8e1a2b3c-1111-2222")


@pytest.mark.parametrize(("engine", "dtype"), [(e, d) for e, ds in ENGINE_KV_CACHE_DTYPES.items() for d in ds])
def test_every_known_kv_cache_dtype_is_accepted(tmp_path, engine, dtype):
    dep = load_one(tmp_path, f"model: m\nengine: {engine}\nkv_cache_dtype: {dtype}")
    assert dep.kv_cache_dtype == dtype


@pytest.mark.parametrize(("engine", "dtype", "hint"), [("sglang", "fp8", "did you mean 'fp8_e4m3'"),
                                                       ("sglang", "fp8_ds_mla", "sglang accepts"),
                                                       ("vllm", "mxfp8", "vllm accepts"),
                                                       ("vllm", "bf16", "did you mean 'bfloat16'")])
def test_kv_cache_dtype_is_checked_against_the_deployments_engine(tmp_path, engine, dtype, hint):
    with pytest.raises(InputError) as err:
        load_one(tmp_path, f"model: m\nengine: {engine}\nkv_cache_dtype: {dtype}")
    text = str(err.value)
    assert "kv_cache_dtype" in text and hint in text and "\n" not in text


@pytest.mark.parametrize(("written", "expected"), [("1", 1.0), ("0.5", 0.5), ("0.92", 0.92)])
def test_memory_fraction_accepts_the_interval_up_to_one(tmp_path, written, expected):
    dep = load_one(tmp_path, f"model: m\nmemory_fraction: {written}")
    assert dep.memory_fraction == pytest.approx(expected)


def test_numbers_and_flags_of_the_other_fields(tmp_path):
    body = """\
        model: m
        engine: sglang
        engine_version: "0.4.10.post2"
        enable_expert_parallel: true
        require: {balance_headroom_gib: 0, kv_tokens: 1}
        launch: {timeout_s: 0.5, dummy_weights: false, enabled: true, command: [/venv/bin/python, -m, sglang]}
    """
    dep = load_one(tmp_path, body)
    assert dep.engine_version == "0.4.10.post2"
    assert dep.enable_expert_parallel is True
    assert dep.require.balance_headroom_gib == 0.0
    assert (dep.launch.timeout_s, dep.launch.dummy_weights, dep.launch.enabled) == (0.5, False, True)
    assert dep.launch.command == ("/venv/bin/python", "-m", "sglang")


# ------------------------------------------------------------------------------------------------
# Unknown keys: named, with the key the user meant
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "key", "hints"), [
    # engine-flag spellings, mapped with what they stand for
    ("gpu_memory_utilization: 0.9", "deployments.d.gpu_memory_utilization",
     ["unknown key 'gpu_memory_utilization': did you mean 'memory_fraction'? (it maps to vLLM "
      "--gpu-memory-utilization and SGLang --mem-fraction-static)"]),
    ("mem_fraction_static: 0.8", "deployments.d.mem_fraction_static", ["did you mean 'memory_fraction'?"]),
    ("tp: 2", "deployments.d.tp", ["did you mean 'tensor_parallel_size'?", "--tp-size"]),
    ("tp_size: 2", "deployments.d.tp_size", ["did you mean 'tensor_parallel_size'?"]),
    ("tensor_parallel: 2", "deployments.d.tensor_parallel", ["did you mean 'tensor_parallel_size'?"]),
    ("pp: 2", "deployments.d.pp", ["did you mean 'pipeline_parallel_size'?"]),
    ("dp_size: 2", "deployments.d.dp_size", ["did you mean 'data_parallel_size'?"]),
    ("context_length: 4096", "deployments.d.context_length",
     ["did you mean 'max_model_len'?", "SGLang --context-length"]),
    ("max_seq_len: 4096", "deployments.d.max_seq_len", ["did you mean 'max_model_len'?"]),
    ("load_format: dummy", "deployments.d.load_format", ["did you mean 'launch.dummy_weights'?"]),
    # flag spelled as a key: dashes and capitals
    ("tensor-parallel-size: 2", "deployments.d.tensor-parallel-size",
     ["did you mean 'tensor_parallel_size'?", "lower case with underscores"]),
    ("Model: x", "deployments.d.Model", ["did you mean 'model'?"]),
    # typos
    ("max_model_length: 4096", "deployments.d.max_model_length", ["did you mean 'max_model_len'?"]),
    ("kv_cache_dtpye: fp8", "deployments.d.kv_cache_dtpye", ["did you mean 'kv_cache_dtype'?"]),
    # keys one level too high
    ("kv_tokens: 100", "deployments.d.kv_tokens", ["did you mean 'require.kv_tokens'?"]),
    ("args: [--enforce-eager]", "deployments.d.args", ["did you mean 'launch.args'?"]),
    # nothing close: the known keys are listed
    ("colour: blue", "deployments.d.colour", ["unknown key 'colour'", "expected one of: model, engine"]),
    # inside require and launch
    ("require: {min_kv_tokens: 5}", "deployments.d.require.min_kv_tokens", ["did you mean 'kv_tokens'?"]),
    ("require: {concurency: 5}", "deployments.d.require.concurency", ["did you mean 'concurrency'?"]),
    ("require: {links: [NVLink]}", "deployments.d.require.links", ["did you mean 'tp_links'?"]),
    ("launch: {timeout: 5}", "deployments.d.launch.timeout", ["did you mean 'timeout_s'?"]),
    ("launch: {cmd: [vllm]}", "deployments.d.launch.cmd", ["did you mean 'command'?"]),
    ("launch: {environment: {}}", "deployments.d.launch.environment", ["did you mean 'env'?"]),
    ("launch: {dummy: true}", "deployments.d.launch.dummy", ["did you mean 'dummy_weights'?"]),
    ("launch: {enabeld: true}", "deployments.d.launch.enabeld", ["did you mean 'enabled'?"]),
])
def test_unknown_deployment_keys_name_the_key_and_the_fix(tmp_path, body, key, hints):
    assert_error(tmp_path, one_deployment(f"model: m\n{body}"), key, *hints)


@pytest.mark.parametrize(("top", "key", "hints"), [
    ("deployment: {}\n", "deployment", ["did you mean 'deployments'?"]),
    ("default: {engine: vllm}\n", "default", ["did you mean 'defaults'?"]),
    ("machin: auto\n", "machin", ["did you mean 'machine'?"]),
    ("model: m\n", "model", ["belongs inside a deployment", "deployments.<name> or under defaults"]),
    ("gpu_memory_utilization: 0.9\n", "gpu_memory_utilization",
     ["belongs inside a deployment", "did you mean 'memory_fraction'?"]),
    ("whatever: 1\n", "whatever", ["expected one of: version, machine, defaults, deployments"]),
])
def test_unknown_top_level_keys(tmp_path, top, key, hints):
    assert_error(tmp_path, one_deployment("model: m", extra_top=top), key, *hints)


def test_unknown_key_in_defaults_names_defaults(tmp_path):
    text = "version: 1\ndefaults: {gpu_memory_utilization: 0.9}\ndeployments:\n  d: {model: m}\n"
    assert_error(tmp_path, text, "defaults.gpu_memory_utilization", "did you mean 'memory_fraction'?")


def test_bad_value_in_defaults_names_defaults_not_the_deployment(tmp_path):
    text = "version: 1\ndefaults: {engine: vlm}\ndeployments:\n  d: {model: m}\n"
    message = assert_error(tmp_path, text, "defaults.engine", "did you mean 'vllm'?")
    assert "deployments.d" not in message


# ------------------------------------------------------------------------------------------------
# Wrong types and impossible values
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "key", "hints"), [
    # integers: a YAML boolean is not a count, nor is a quoted or decimal number
    ("tensor_parallel_size: true", "tensor_parallel_size", ["integer >= 1", "not the boolean true"]),
    ("tensor_parallel_size: yes", "tensor_parallel_size", ["not the boolean true"]),
    ("tensor_parallel_size: '2'", "tensor_parallel_size", ["not the string '2'", "write 2 without quotes"]),
    ("tensor_parallel_size: 2.0", "tensor_parallel_size", ["not the decimal number 2.0", "write 2"]),
    ("tensor_parallel_size: 1.5", "tensor_parallel_size", ["integer >= 1", "not the number 1.5"]),
    ("tensor_parallel_size: 0", "tensor_parallel_size", ["integer >= 1, not 0"]),
    ("pipeline_parallel_size: -1", "pipeline_parallel_size", ["integer >= 1, not -1"]),
    ("data_parallel_size: 0", "data_parallel_size", ["integer >= 1, not 0"]),
    ("data_parallel_size: null", "data_parallel_size", ["not null"]),
    ("tensor_parallel_size: [2]", "tensor_parallel_size", ["not a list"]),
    ("max_model_len: 0", "max_model_len", ["integer >= 1, not 0"]),
    ("max_model_len: 8k", "max_model_len", ["not the string '8k'", "plain number"]),
    ("max_model_len: '8192'", "max_model_len", ["write 8192 without quotes"]),
    # memory fraction
    ("memory_fraction: 0", "memory_fraction", ["in (0, 1]", "not 0"]),
    ("memory_fraction: 1.01", "memory_fraction", ["in (0, 1], e.g. 0.9, not 1.01"]),
    ("memory_fraction: 90", "memory_fraction", ["for 90% write 0.9"]),
    ("memory_fraction: -0.5", "memory_fraction", ["in (0, 1]"]),
    ("memory_fraction: '0.9'", "memory_fraction", ["not the string '0.9'", "without quotes"]),
    ("memory_fraction: .nan", "memory_fraction", ["nan"]),
    ("memory_fraction: true", "memory_fraction", ["not the boolean true"]),
    # choices with did-you-mean
    ("engine: vlm", "engine", ["unknown engine 'vlm': did you mean 'vllm'?", "vllm, sglang"]),
    ("engine: sg-lang", "engine", ["did you mean 'sglang'?"]),
    ("engine: VLLM", "engine", ["did you mean 'vllm'?"]),
    ("engine: tensorrt", "engine", ["unknown engine 'tensorrt'", "expected one of: vllm, sglang"]),
    ("engine: null", "engine", ["not null"]),
    ("kv_cache_dtype: FP8", "kv_cache_dtype", ["did you mean 'fp8'?"]),
    ("kv_cache_dtype: fp8-e4m3", "kv_cache_dtype", ["did you mean 'fp8_e4m3'?"]),
    ("kv_cache_dtype: fp9", "kv_cache_dtype", ["unknown kv_cache_dtype 'fp9'"]),
    # model
    ("model: 5", "model", ["not the number 5"]),
    ("model: ''", "model", ["not an empty string"]),
    # engine version: YAML would read 0.10 as 0.1
    ("engine_version: 0.10", "engine_version", ["quoted version string", "not the number 0.1"]),
    ("engine_version: 1", "engine_version", ["quoted version string", "not the number 1"]),
    ("engine_version: not-a-version", "engine_version", ["is not a version number"]),
    ("enable_expert_parallel: 'true'", "enable_expert_parallel", ["true or false", "without quotes"]),
    ("enable_expert_parallel: 1", "enable_expert_parallel", ["true or false", "write true"]),
])
def test_wrong_types_and_values(tmp_path, body, key, hints):
    # a body that is about 'model' itself replaces the default 'model: m' line
    text = one_deployment(body if body.startswith("model:") else f"model: m\n{body}")
    assert_error(tmp_path, text, f"deployments.d.{key}", *hints)


@pytest.mark.parametrize(("body", "key", "hints"), [
    ("gpus: [0, 1, 2]\ntensor_parallel_size: 2\npipeline_parallel_size: 2", "gpus",
     ["gpus lists 3 GPUs but tensor_parallel_size x pipeline_parallel_size x data_parallel_size = 4",
      "(2 x 2 x 1)", "leave gpus out"]),
    ("gpus: [0]\ndata_parallel_size: 2", "gpus", ["gpus lists 1 GPU but", "= 2 (1 x 1 x 2)"]),
    ("gpus: [0, 1]", "gpus", ["gpus lists 2 GPUs but", "= 1 (1 x 1 x 1)"]),
    ("gpus: [0, 0]\ntensor_parallel_size: 2", "gpus", ["lists GPU 0 twice"]),
    ("gpus: [GPU-abc, gpu-ABC]\ntensor_parallel_size: 2", "gpus[1]", ["neither a CUDA index nor a GPU UUID"]),
    ("gpus: [GPU-abc1, GPU-ABC1]\ntensor_parallel_size: 2", "gpus", ["twice"]),
    ("gpus: [-1]", "gpus[0]", ["CUDA index >= 0, not -1"]),
    ("gpus: ['0']", "gpus[0]", ["write 0 without quotes"]),
    ("gpus: [true]", "gpus[0]", ["not the boolean true"]),
    ("gpus: [1.5]", "gpus[0]", ["not the number 1.5"]),
    ("gpus: [cuda:0]", "gpus[0]", ["neither a CUDA index nor a GPU UUID", "nvidia-smi -L"]),
    ("gpus: '0,1'\ntensor_parallel_size: 2", "gpus", ["write it as a list: [0, 1]"]),
    ("gpus: 0", "gpus", ["write [0]"]),
    ("gpus: []", "gpus", ["is empty"]),
])
def test_gpus_must_match_the_layout(tmp_path, body, key, hints):
    assert_error(tmp_path, one_deployment(f"model: m\n{body}"), f"deployments.d.{key}", *hints)


@pytest.mark.parametrize(("body", "key", "hints"), [
    ("kv_tokens: 0", "kv_tokens", ["integer >= 1, not 0"]),
    ("kv_tokens: 65536.5", "kv_tokens", ["integer >= 1"]),
    ("concurrency: '8'", "concurrency", ["write 8 without quotes"]),
    ("concurrency: true", "concurrency", ["not the boolean true"]),
    ("tp_links: nvlink", "tp_links", ["write it as a list: [nvlink]"]),
    ("tp_links: []", "tp_links", ["is empty", "default policy"]),
    ("tp_links: [pcie]", "tp_links[0]", ["not one link kind", "PIX, PXB, PHB, NODE, SYS"]),
    ("tp_links: [NVLink, PHBX]", "tp_links[1]", ["unknown link kind 'PHBX'", "did you mean 'PHB'?"]),
    ("tp_links: [nvlnk]", "tp_links[0]", ["did you mean 'NVLink'?"]),
    ("tp_links: [12]", "tp_links[0]", ["not the number 12"]),
    ("balance_headroom_gib: -1", "balance_headroom_gib", [">= 0, not -1"]),
    ("balance_headroom_gib: '1.0'", "balance_headroom_gib", ["without quotes"]),
    ("balance_headroom_gib: .inf", "balance_headroom_gib", ["inf"]),
])
def test_require_values(tmp_path, body, key, hints):
    text = one_deployment("model: m\nrequire:\n" + textwrap.indent(body, "  "))
    assert_error(tmp_path, text, f"deployments.d.require.{key}", *hints)


@pytest.mark.parametrize(("body", "key", "hints"), [
    ("enabled: 'yes'", "enabled", ["true or false", "without quotes"]),
    ("enabled: 1", "enabled", ["write true"]),
    ("dummy_weights: 0", "dummy_weights", ["write false"]),
    ("command: vllm serve", "command", ["write it as a list: [vllm, serve]", "never run through a shell"]),
    ("command: \"python -m 'sglang.launch_server'\"", "command",
     ["[python, -m, sglang.launch_server]"]),
    ("command: []", "command", ["must not be empty"]),
    ("command: [vllm, 1]", "command[1]", ["not the number 1", "quote it: \"1\""]),
    ("command: ['']", "command[0]", ["empty string"]),
    ("args: --enforce-eager", "args", ["write it as a list: [--enforce-eager]"]),
    ("args: [--max-num-seqs, 4]", "args[1]", ["must be a string, not the number 4", "quote it: \"4\""]),
    ("args: [--x, {a: 1}]", "args[1]", ["not a mapping"]),
    ("env: {VLLM_LOGGING_LEVEL: 1}", "env.VLLM_LOGGING_LEVEL", ["not the number 1", "quote it: \"1\""]),
    ("env: {FLAG: true}", "env.FLAG", ["quote it: \"true\""]),
    ("env: {'BAD NAME': x}", "env.BAD NAME", ["not an environment variable name"]),
    ("env: {CUDA_VISIBLE_DEVICES: '0'}", "env.CUDA_VISIBLE_DEVICES", ["'gpus' key"]),
    ("env: [A=1]", "env", ["must be a mapping"]),
    ("timeout_s: 0", "timeout_s", ["> 0, not 0"]),
    ("timeout_s: -5", "timeout_s", ["> 0, not -5"]),
    ("timeout_s: '900'", "timeout_s", ["without quotes"]),
    ("timeout_s: null", "timeout_s", ["not null"]),
])
def test_launch_values(tmp_path, body, key, hints):
    text = one_deployment("model: m\nlaunch:\n" + textwrap.indent(body, "  "))
    assert_error(tmp_path, text, f"deployments.d.launch.{key}", *hints)


@pytest.mark.parametrize(("args", "index", "hints"), [
    ("[--enforce-eager, --tensor-parallel-size, '4']", 1, ["'tensor_parallel_size' controls"]),
    ("['--gpu-memory-utilization=0.8']", 0, ["'memory_fraction' controls"]),
    ("[--context-length, '4096']", 0, ["'max_model_len' controls"]),
    ("[-tp, '2']", 0, ["'tensor_parallel_size'"]),
    ("[--kv-cache-dtype, fp8]", 0, ["'kv_cache_dtype'"]),
    ("[--host, 0.0.0.0]", 0, ["127.0.0.1 only"]),
    ("['--port=8000']", 0, ["127.0.0.1 only"]),
    ("[--load-format, safetensors]", 0, ["dummy_weights: false"]),
])
def test_launch_args_may_not_contradict_the_manifest(tmp_path, args, index, hints):
    text = one_deployment(f"model: m\nlaunch: {{args: {args}}}")
    assert_error(tmp_path, text, f"deployments.d.launch.args[{index}]", *hints)


def test_load_format_is_allowed_with_real_weights(tmp_path):
    text = one_deployment("model: m\nlaunch: {dummy_weights: false, args: [--load-format, safetensors]}")
    assert load_manifest(write(tmp_path, text)).deployments[0].launch.args == ("--load-format", "safetensors")


@pytest.mark.parametrize(("section", "hints"), [
    ("require: [kv_tokens]", ["deployments.d.require", "must be a mapping"]),
    ("launch: true", ["deployments.d.launch", "must be a mapping", "not the boolean true"]),
])
def test_sections_must_be_mappings(tmp_path, section, hints):
    assert_error(tmp_path, one_deployment(f"model: m\n{section}"), hints[0], *hints[1:])


def test_gpus_mismatch_inherited_from_defaults_says_so(tmp_path):
    text = "version: 1\ndefaults: {gpus: [0, 1]}\ndeployments:\n  d: {model: m, tensor_parallel_size: 4}\n"
    assert_error(tmp_path, text, "deployments.d.gpus",
                 "gpus lists 2 GPUs but", "= 4", "gpus is set in defaults")


def test_missing_model_names_the_deployment(tmp_path):
    assert_error(tmp_path, one_deployment("tensor_parallel_size: 2"), "deployments.d.model",
                 "missing", "catalog id")


# ------------------------------------------------------------------------------------------------
# Top level: version, machine, deployments, names
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "key", "hints"), [
    ("deployments: {d: {model: m}}\n", "version", ["missing", "version: 1"]),
    ("version: 2\ndeployments: {d: {model: m}}\n", "version",
     ["unsupported manifest version 2;", "reads version 1"]),
    ("version: '1'\ndeployments: {d: {model: m}}\n", "version", ["write 1 without quotes"]),
    ("version: true\ndeployments: {d: {model: m}}\n", "version",
     ["must be the number 1, not the boolean true"]),
    ("version: 1.0\ndeployments: {d: {model: m}}\n", "version", ["must be the number 1, not the number 1.0"]),
    ("version: 1\nmachine:\ndeployments: {d: {model: m}}\n", "machine", ["not null", "preset:<name>"]),
    ("version: 1\nmachine: 3\ndeployments: {d: {model: m}}\n", "machine", ["not the number 3"]),
    ("version: 1\nmachine: Auto\ndeployments: {d: {model: m}}\n", "machine", ["did you mean 'auto'?"]),
    ("version: 1\nmachine: 'preset:'\ndeployments: {d: {model: m}}\n", "machine", ["needs a name"]),
    ("version: 1\ndefaults: [engine]\ndeployments: {d: {model: m}}\n", "defaults", ["must be a mapping"]),
    ("version: 1\n", "deployments", ["missing"]),
    ("version: 1\ndeployments:\n", "deployments", ["is empty"]),
    ("version: 1\ndeployments: {}\n", "deployments", ["is empty"]),
    ("version: 1\ndeployments:\n  - name: d\n    model: m\n", "deployments",
     ["not a list", "mapping keyed by deployment name"]),
    ("version: 1\ndeployments: qwen\n", "deployments", ["not the string 'qwen'"]),
    ("version: 1\ndeployments:\n  d:\n", "deployments.d", ["is empty", "needs at least 'model'"]),
    ("version: 1\ndeployments:\n  d: Qwen/Qwen3-8B\n", "deployments.d", ["must be a mapping"]),
    ("version: 1\ndeployments:\n  'qwen 8b': {model: m}\n", "deployments.qwen 8b",
     ["bad deployment name 'qwen 8b'", "test id"]),
    ("version: 1\ndeployments:\n  -tp2: {model: m}\n", "deployments.-tp2",
     ["starting with a letter or digit"]),
    ("version: 1\ndeployments:\n  'a/b': {model: m}\n", "deployments.a/b", ["bad deployment name"]),
    ("version: 1\ndeployments:\n  7: {model: m}\n", "deployments.7", ["names must be strings", "quote it"]),
])
def test_top_level_errors(tmp_path, text, key, hints):
    assert_error(tmp_path, text, key, *hints)


@pytest.mark.parametrize("name", ["qwen3-8b-tp2", "Qwen3.5_TP2", "7b", "a"])
def test_deployment_names_usable_as_test_ids(tmp_path, name):
    text = f"version: 1\ndeployments:\n  {name}: {{model: m}}\n"
    assert load_manifest(write(tmp_path, text)).names == (name,)


@pytest.mark.parametrize(("text", "hints"), [
    ("", ["the manifest is empty"]),
    ("# nothing but a comment\n", ["the manifest is empty"]),
    ("- version: 1\n", ["must be a mapping", "not a list"]),
    ("just text\n", ["must be a mapping", "not the string 'just text'"]),
])
def test_empty_or_shapeless_file(tmp_path, text, hints):
    assert_error(tmp_path, text, None, *hints)


# ------------------------------------------------------------------------------------------------
# YAML problems: duplicate keys, syntax errors, unreadable files
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "key", "hints"), [
    ("version: 1\ndeployments:\n  a: {model: x}\n  b: {model: y}\n  a: {model: z}\n",
     "deployments.a", ["duplicate key 'a' at line 5 (first at line 3)", "keep only the last one"]),
    ("version: 1\ndeployments:\n  a:\n    model: x\n"
     "    tensor_parallel_size: 2\n    tensor_parallel_size: 4\n",
     "deployments.a.tensor_parallel_size", ["at line 6 (first at line 5)"]),
    ("version: 1\nversion: 1\ndeployments: {a: {model: x}}\n", "version", ["at line 2 (first at line 1)"]),
    ("version: 1\ndeployments:\n  a:\n    model: x\n    launch:\n      env: {A: '1', A: '2'}\n",
     "deployments.a.launch.env.A", ["duplicate key 'A' at line 6"]),
])
def test_duplicate_keys_are_errors_with_lines(tmp_path, text, key, hints):
    assert_error(tmp_path, text, key, *hints)


@pytest.mark.parametrize(("text", "hints"), [
    ("version: 1\ndeployments:\n  a:\n    model: x\n   engine: vllm\n", ["invalid YAML at line 5"]),
    ("version: 1\ndeployments:\n  a: {model: x\n", ["invalid YAML at line 4", "starts at line 3"]),
    ("version: 1\ndeployments:\n  a:\n\tmodel: x\n", ["invalid YAML at line 4"]),
    ("version: 1\n---\nversion: 1\n", ["only one YAML document", "second one starts at line 2"]),
    ("version: 1\nx: !!python/object:os.system ls\n", ["invalid YAML at line 2"]),
])
def test_yaml_syntax_errors_name_the_line(tmp_path, text, hints):
    assert_error(tmp_path, text, None, *hints)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as info:
        load_manifest(path)
    assert str(info.value) == f"{path}: manifest not found"


def test_directory_points_at_the_manifest_inside(tmp_path):
    write(tmp_path, "version: 1\n")
    with pytest.raises(InputError, match="is a directory.*did you mean .*gpulayout.yaml"):
        load_manifest(tmp_path)


def test_binary_file(tmp_path):
    path = tmp_path / "gpulayout.yaml"
    path.write_bytes(b"version: 1\n\xff\xfe\x00garbage")
    with pytest.raises(InputError, match=r"not UTF-8 text"):
        load_manifest(path)


def test_errors_name_the_path_as_the_user_gave_it(tmp_path, monkeypatch):
    write(tmp_path / "conf", one_deployment("model: m\ntensor_parallel_size: 0"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as info:
        load_manifest("conf/gpulayout.yaml")
    assert str(info.value).startswith("conf/gpulayout.yaml: deployments.d.tensor_parallel_size: ")
    assert info.value.key == "deployments.d.tensor_parallel_size"
    assert info.value.where == "conf/gpulayout.yaml"


# ------------------------------------------------------------------------------------------------
# Finding the manifest, and picking a deployment
# ------------------------------------------------------------------------------------------------
def test_find_manifest_order(tmp_path, monkeypatch):
    root = tmp_path / "root"
    default = write(root, "version: 1\n")
    from_ini = write(root / "conf", "version: 1\n", name="ini.yaml")
    explicit = write(tmp_path / "cli", "version: 1\n", name="explicit.yaml")
    monkeypatch.chdir(tmp_path / "cli")

    assert find_manifest("explicit.yaml", "conf/ini.yaml", root) == explicit
    assert find_manifest(None, "conf/ini.yaml", root) == from_ini      # ini: relative to rootdir
    assert find_manifest("", "", root) == default
    assert find_manifest(None, None, root) == default


def test_find_manifest_never_falls_through_a_named_path(tmp_path):
    write(tmp_path, "version: 1\n")                              # a default exists ...
    with pytest.raises(InputError) as info:                     # ... but the user named another
        find_manifest(str(tmp_path / "typo.yaml"), None, tmp_path)
    assert str(info.value) == f"{tmp_path / 'typo.yaml'}: manifest not found"
    with pytest.raises(InputError, match=r"manifest not found \(named by ini option gpulayout_manifest\)"):
        find_manifest(None, "missing.yaml", tmp_path)


def test_find_manifest_none_found_hint(tmp_path):
    with pytest.raises(InputError) as info:
        find_manifest(None, None, tmp_path)
    assert str(info.value) == f"no gpulayout.yaml in {tmp_path}; pass --gpulayout-manifest PATH"
    (tmp_path / "gpulayout.yml").write_text("version: 1\n")
    with pytest.raises(InputError, match="found gpulayout.yml: rename it"):
        find_manifest(None, None, tmp_path)
    with pytest.raises(InputError, match="pass MANIFEST$|pass MANIFEST "):
        find_manifest(None, None, tmp_path, flag="MANIFEST")


def test_deployment_lookup_suggests_names(tmp_path):
    manifest = load_manifest(write(tmp_path, "version: 1\ndeployments:\n  qwen3-8b-tp2: {model: m}\n"
                                             "  qwen3-8b-pp2: {model: m}\n"))
    assert manifest.deployment("qwen3-8b-pp2").name == "qwen3-8b-pp2"
    with pytest.raises(InputError, match=r"no deployment named 'qwen3-8b-tp3': did you mean 'qwen3-8b-tp2'"):
        manifest.deployment("qwen3-8b-tp3")


def test_importing_the_module_does_not_import_yaml():
    """The plugin imports this at pytest start-up; YAML must load only when a manifest is read."""
    code = "import sys, pytest_gpulayout.manifest.load; print('yaml' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"
