"""Models found the way a deploy pipeline has them (issue 30): the Hugging Face cache (HF_HUB_CACHE / HF_HOME,
refs and pinned revisions), the Hub through an HF_ENDPOINT on 127.0.0.1 (config and index only, never weights,
HF_TOKEN for gated repositories, what was fetched kept for the next, offline, run), a model map and a models
folder, KServe URIs; and every model that cannot be found as one ModelNotFound saying how to supply it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hubserver import Repo, serve

from pytest_gpulayout import cli
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.resolve import ModelNotFound, ModelSources, NotFound, Origin, resolve_model

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


def _config(layers: int, heads: int = 4) -> dict[str, object]:
    return {"model_type": "llama", "num_attention_heads": heads, "num_key_value_heads": heads,
            "num_hidden_layers": layers, "hidden_size": 64, "intermediate_size": 128, "vocab_size": 128}


def _cache(root: Path, repo_id: str, snapshots: dict[str, dict[str, object]], refs: dict[str, str]) -> Path:
    """A Hugging Face cache holding ``repo_id``'s ``snapshots`` (commit -> files) and ``refs`` (name -> commit)."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    for commit, files in snapshots.items():
        for name, content in files.items():
            path = repo / "snapshots" / commit / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(content))
    for ref, commit in refs.items():
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return root


def _offline(tmp_path: Path, **extra: str) -> ModelSources:
    return ModelSources.from_environ({"HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", **extra})


# -- the Hugging Face cache ----------------------------------------------------------------------------------

def test_an_id_in_the_hf_cache_is_read_from_its_snapshot_with_its_checkpoint_size(tmp_path: Path) -> None:
    index = {"metadata": {"total_size": 123_456_789}, "weight_map": {}}
    cache = _cache(tmp_path / "hub", "acme/tiny", {COMMIT: {"config.json": _config(3),
                                                            "model.safetensors.index.json": index}}, {"main": COMMIT})
    spec = load_model("acme/tiny", tmp_path, sources=_offline(tmp_path, HF_HUB_CACHE=str(cache)))
    assert (spec.name, spec.num_hidden_layers, spec.weight_bytes_measured) == ("acme/tiny", 3, 123_456_789)
    assert spec.source == str(cache / "models--acme--tiny" / "snapshots" / COMMIT / "config.json")


def test_the_cache_follows_hf_home_and_hf_hub_cache_wins(tmp_path: Path) -> None:
    _cache(tmp_path / "home-hf" / "hub", "acme/tiny", {COMMIT: {"config.json": _config(2)}}, {"main": COMMIT})
    _cache(tmp_path / "explicit", "acme/tiny", {COMMIT: {"config.json": _config(5)}}, {"main": COMMIT})
    home = _offline(tmp_path, HF_HOME=str(tmp_path / "home-hf"))
    assert load_model("acme/tiny", sources=home).num_hidden_layers == 2
    both = _offline(tmp_path, HF_HOME=str(tmp_path / "home-hf"), HF_HUB_CACHE=str(tmp_path / "explicit"))
    assert load_model("acme/tiny", sources=both).num_hidden_layers == 5
    xdg = _offline(tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert xdg.hub_cache == tmp_path / "xdg" / "huggingface" / "hub"


def test_a_pinned_revision_reads_that_snapshot(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "hub", "acme/tiny", {COMMIT: {"config.json": _config(2)},
                                                   OTHER: {"config.json": _config(6)}}, {"main": COMMIT, "v2": OTHER})
    sources = _offline(tmp_path, HF_HUB_CACHE=str(cache))
    assert load_model("acme/tiny", sources=sources).num_hidden_layers == 2
    assert load_model("acme/tiny@v2", sources=sources).num_hidden_layers == 6          # a tag, through refs/
    assert load_model(f"acme/tiny@{OTHER}", sources=sources).num_hidden_layers == 6    # a commit
    assert load_model("acme/tiny@fedcba9", sources=sources).num_hidden_layers == 6     # its prefix
    assert load_model("acme/tiny", sources=sources, revision="v2").num_hidden_layers == 6  # --revision
    with pytest.raises(ModelNotFound) as err:
        load_model("acme/tiny@v3", sources=sources)
    assert err.value.reason is NotFound.NOT_LOCAL and "at v3" in str(err.value)


def test_a_catalog_model_in_the_cache_is_read_from_the_cache(tmp_path: Path) -> None:
    # the engine loads the cached snapshot, not the catalog's copy of the Hub's config
    cache = _cache(tmp_path / "hub", "Qwen/Qwen3-8B", {COMMIT: {"config.json": _config(2)}}, {"main": COMMIT})
    found = resolve_model("Qwen/Qwen3-8B", sources=_offline(tmp_path, HF_HUB_CACHE=str(cache)))
    assert (found.origin, found.commit) == (Origin.HF_CACHE, COMMIT)
    assert resolve_model("Qwen/Qwen3-8B", sources=_offline(tmp_path)).origin is Origin.CATALOG
    # a pinned revision is never answered by the catalog, which has none
    with pytest.raises(ModelNotFound):
        resolve_model("Qwen/Qwen3-8B@abc1234", sources=_offline(tmp_path))


def test_offline_an_unknown_id_says_how_to_supply_it(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound) as err:
        load_model("Qwen/Qwen3-8", sources=_offline(tmp_path))
    text = str(err.value)
    assert err.value.reason is NotFound.NOT_LOCAL
    assert "HF_HUB_OFFLINE" in text and "hf download Qwen/Qwen3-8 config.json" in text
    assert "Did you mean Qwen/Qwen3-8B" in text and "GPULAYOUT_MODEL_MAP" in text and "\n" not in text


# -- the Hub ---------------------------------------------------------------------------------------------------

@pytest.fixture
def online(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment of a machine that is online, with its own empty caches."""
    import huggingface_hub.constants

    # huggingface_hub reads HF_HUB_OFFLINE once, at import: the suite sets it (tests/conftest.py)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    return {"HOME": str(tmp_path / "home"), "HF_HUB_CACHE": str(tmp_path / "hub"),
            "GPULAYOUT_CACHE": str(tmp_path / "gpulayout-cache")}


def _repos() -> dict[str, Repo]:
    index = json.dumps({"metadata": {"total_size": 987_654_321}, "weight_map": {}}).encode()
    return {
        "acme/sharded": Repo(COMMIT, {"config.json": json.dumps(_config(4)).encode(),
                                      "model.safetensors.index.json": index,
                                      "model-00001-of-00002.safetensors": b"weights!",
                                      "model-00002-of-00002.safetensors": b"weights!"}),
        "acme/single": Repo(OTHER, {"config.json": json.dumps(_config(2)).encode(),
                                    "model.safetensors": b"weights!"}, safetensors={"BF16": 1000, "F32": 10}),
        "acme/gated": Repo(COMMIT, {"config.json": json.dumps(_config(3)).encode()}, gated=True),
        "acme/gguf-only": Repo(COMMIT, {"tiny-Q4_K_M.gguf": b"GGUF"}),
    }


def test_an_id_on_the_hub_is_fetched_into_the_cache_without_weights_and_read_offline_after(
        tmp_path: Path, online: dict[str, str]) -> None:
    with serve(_repos()) as hub:
        env = {**online, "HF_ENDPOINT": hub.url}
        found = resolve_model("acme/sharded", sources=ModelSources.from_environ(env))
        spec = load_model("acme/sharded", sources=ModelSources.from_environ(env))
        asked = list(hub.requests)
    assert (found.origin, found.commit) == (Origin.HUB, COMMIT)
    assert found.config == tmp_path / "hub" / "models--acme--sharded" / "snapshots" / COMMIT / "config.json"
    assert (spec.num_hidden_layers, spec.weight_bytes_measured) == (4, 987_654_321)
    assert not [p for _, p in asked if p.endswith(".safetensors")]   # never weights
    # what was fetched is in the Hugging Face cache: the second resolution asked nothing, an offline run reads it
    assert len([p for _, p in asked if "/api/models/" in p]) == 1
    again = resolve_model("acme/sharded", sources=ModelSources.from_environ({**env, "HF_HUB_OFFLINE": "1"}))
    assert (again.origin, again.commit) == (Origin.HF_CACHE, COMMIT)


def test_a_single_file_checkpoint_is_sized_from_the_hubs_count_on_and_off_line(
        online: dict[str, str]) -> None:
    with serve(_repos()) as hub:
        env = {**online, "HF_ENDPOINT": hub.url}
        spec = load_model("acme/single", sources=ModelSources.from_environ(env))
    assert spec.weight_bytes_measured == 1000 * 2 + 10 * 4
    offline = load_model("acme/single", sources=ModelSources.from_environ({**env, "HF_HUB_OFFLINE": "1"}))
    assert offline.weight_bytes_measured == spec.weight_bytes_measured


def test_a_gated_model_needs_hf_token(online: dict[str, str]) -> None:
    with serve(_repos()) as hub:
        env = {**online, "HF_ENDPOINT": hub.url}
        with pytest.raises(ModelNotFound) as err:
            load_model("acme/gated", sources=ModelSources.from_environ(env))
        assert err.value.reason is NotFound.GATED and "HF_TOKEN" in str(err.value)
        spec = load_model("acme/gated", sources=ModelSources.from_environ({**env, "HF_TOKEN": hub.token}))
    assert spec.num_hidden_layers == 3


@pytest.mark.parametrize(("ref", "reason", "words"), [
    ("acme/nothing", NotFound.NO_SUCH_REPO, "is not a model repository"),
    ("acme/sharded@v9", NotFound.NO_SUCH_REVISION, "has no revision 'v9'"),
    ("acme/gguf-only", NotFound.NO_CONFIG, "has no config.json"),
])
def test_what_the_hub_refuses_is_said(online: dict[str, str], ref: str, reason: NotFound, words: str) -> None:
    with serve(_repos()) as hub, pytest.raises(ModelNotFound) as err:
        load_model(ref, sources=ModelSources.from_environ({**online, "HF_ENDPOINT": hub.url}))
    assert err.value.reason is reason and words in str(err.value) and hub.url in str(err.value)


def test_a_hub_that_does_not_answer_fails_within_seconds(online: dict[str, str]) -> None:
    start = time.monotonic()
    with pytest.raises(ModelNotFound) as err:
        load_model("acme/sharded", sources=ModelSources.from_environ({**online, "HF_ENDPOINT": "http://127.0.0.1:9"}))
    assert err.value.reason is NotFound.HUB_UNREACHABLE and "did not answer" in str(err.value)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("ref", ["hf://acme/sharded", "hf://acme/sharded:0123456", "https://huggingface.co/acme/sharded",
                                 "acme/sharded:main"])
def test_kserve_and_hub_urls_name_the_same_model(online: dict[str, str], ref: str) -> None:
    with serve(_repos()) as hub:
        found = resolve_model(ref, sources=ModelSources.from_environ({**online, "HF_ENDPOINT": hub.url}))
    assert (found.repo_id, found.commit) == ("acme/sharded", COMMIT)


# -- a model map, a models folder, what cannot be read from here ------------------------------------------------

def test_a_model_map_maps_uris_and_container_paths(tmp_path: Path) -> None:
    local = tmp_path / "maps" / "llama"
    local.mkdir(parents=True)
    (local / "config.json").write_text(json.dumps(_config(7)))
    cache = _cache(tmp_path / "hub", "acme/tiny", {COMMIT: {"config.json": _config(2)}}, {"main": COMMIT})
    mapping = tmp_path / "maps" / "models.yaml"
    mapping.write_text("pvc://models-pvc/llama: ./llama\n/mnt/models: acme/tiny\n")
    sources = _offline(tmp_path, HF_HUB_CACHE=str(cache), GPULAYOUT_MODEL_MAP=str(mapping))
    assert load_model("pvc://models-pvc/llama", sources=sources).num_hidden_layers == 7
    assert load_model("/mnt/models/", sources=sources).num_hidden_layers == 2
    mapping.write_text("s3://bucket/llama: ./nowhere\n")
    with pytest.raises(ModelNotFound) as err:
        load_model("s3://bucket/llama", sources=_offline(tmp_path, GPULAYOUT_MODEL_MAP=str(mapping)))
    assert err.value.reason is NotFound.NO_SUCH_PATH and str(mapping) in str(err.value)


@pytest.mark.parametrize(("text", "words"), [("- a\n- b\n", "must be a mapping"),
                                             ("acme/tiny: [1]\n", "acme/tiny: must be a local path")])
def test_a_bad_model_map_is_one_line(tmp_path: Path, text: str, words: str) -> None:
    mapping = tmp_path / "models.yaml"
    mapping.write_text(text)
    with pytest.raises(InputError) as err:
        _offline(tmp_path, GPULAYOUT_MODEL_MAP=str(mapping))
    assert str(err.value).startswith(str(mapping)) and words in str(err.value)


def test_a_models_folder_holds_ids_as_folders_or_as_a_cache(tmp_path: Path) -> None:
    (tmp_path / "models" / "acme" / "plain").mkdir(parents=True)
    (tmp_path / "models" / "acme" / "plain" / "config.json").write_text(json.dumps(_config(3)))
    _cache(tmp_path / "models", "acme/cached", {COMMIT: {"config.json": _config(5)}}, {"main": COMMIT})
    sources = _offline(tmp_path, GPULAYOUT_MODELS=str(tmp_path / "models"))
    assert load_model("acme/plain", sources=sources).num_hidden_layers == 3
    assert resolve_model("acme/cached", sources=sources).origin is Origin.MODELS_DIR
    given = ModelSources.from_environ({"HF_HUB_OFFLINE": "1"}, models_dirs=[Path("models")], base_dir=tmp_path)
    assert load_model("acme/plain", sources=given).num_hidden_layers == 3


_MAP_IT = "map the reference to one in a model map (GPULAYOUT_MODEL_MAP=FILE)"


@pytest.mark.parametrize(("ref", "reason", "words", "fix"), [
    ("pvc://models-pvc/llama-70b", NotFound.STORAGE_URI, "a PersistentVolumeClaim", _MAP_IT),
    ("s3://bucket/llama", NotFound.STORAGE_URI, "an S3 bucket", _MAP_IT),
    ("$MODEL_ID", NotFound.UNSET_VARIABLE, "shell variable", "the container's env"),
    ("${MODEL:-x}", NotFound.UNSET_VARIABLE, "shell variable", "the container's env"),
    ("/mnt/models", NotFound.NO_SUCH_PATH, "no such file or directory", _MAP_IT),
])
def test_what_cannot_be_read_from_here_is_named(tmp_path: Path, ref: str, reason: NotFound, words: str,
                                                fix: str) -> None:
    with pytest.raises(ModelNotFound) as err:
        load_model(ref, tmp_path, sources=_offline(tmp_path))
    assert err.value.reason is reason and words in str(err.value) and fix in str(err.value)


def test_gpulayout_check_reads_a_model_from_the_cache_and_names_a_missing_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cache = _cache(tmp_path / "hub", "acme/tiny", {COMMIT: {"config.json": _config(2)}}, {"main": COMMIT})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    manifest = tmp_path / "gpulayout.yaml"
    manifest.write_text("version: 1\nmachine: preset:2xL4-pcie\ndeployments:\n  x:\n    model: acme/tiny\n"
                        "    engine: vllm\n    tensor_parallel_size: 2\n    engine_version: '0.11.0'\n")
    assert cli.main(["check", str(manifest), "--json"]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    assert out["deployments"]["x"]["checks"]["heads"]["data"]["num_attention_heads"] == 4
    manifest.write_text(manifest.read_text().replace("acme/tiny", "acme/elsewhere"))
    assert cli.main(["check", str(manifest), "--json"]) == 1  # its deployment's config fails (issue 30)
    err = json.loads(capsys.readouterr().out)["deployments"]["x"]["checks"]["config"]["message"]
    assert "\n" not in err and "deployments.x.model" in err and "HF_HUB_OFFLINE" in err
