"""Asking the Hugging Face Hub (or the mirror ``HF_ENDPOINT`` names) for what a model's checks read.

Never weights: one ``model_info`` call (the commit, the file list, the Hub's own count of the safetensors
parameters by dtype), then ``config.json`` and, where the repository has one, the safetensors (or PyTorch)
index, whose ``metadata.total_size`` is the checkpoint's bytes. Both files go through ``hf_hub_download`` into
the Hugging Face cache the engine itself will read, so the next run (and an offline one) finds them there.
A single-file checkpoint has no index: its bytes come from the Hub's parameter count and are kept in a small
JSON of this tool's own (``hfcache.weights_record``), beside the cache, so that an offline run judges the same bytes.

Every failure becomes a ``HubError`` with a ``HubFailure`` and a sentence saying what to do: gated
(``HF_TOKEN``), no such repository or revision, no ``config.json`` (a GGUF repository), or the Hub not
reached within the timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from pytest_gpulayout.model.hfcache import write_weights_record
from pytest_gpulayout.model.weights import SAFETENSORS_DTYPE_BYTES

#: the files of a repository a model's checks read, besides ``config.json`` (``model/weights.py``)
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


class HubFailure(Enum):
    UNREACHABLE = "unreachable"
    NO_SUCH_REPO = "no_such_repo"
    GATED = "gated"
    NO_SUCH_REVISION = "no_such_revision"
    NO_CONFIG = "no_config"


class HubError(Exception):
    """The Hub could not give a model's ``config.json``: ``reason`` says why, ``str()`` what to do."""

    def __init__(self, reason: HubFailure, message: str):
        self.reason = reason
        self.message = message
        super().__init__(message)


@dataclass(frozen=True)
class Fetched:
    """A model's config (and index) as fetched into the cache."""

    repo_id: str
    commit: str
    folder: Path                # the cache snapshot folder holding config.json
    #: checkpoint bytes from the Hub's safetensors count, where no index in ``folder`` gives them
    weight_bytes: int | None


def _parameter_bytes(parameters: Mapping[str, int]) -> int | None:
    """Bytes of a checkpoint from the Hub's parameter count per safetensors dtype (None: a dtype not known)."""
    total = 0
    for dtype, count in parameters.items():
        size = SAFETENSORS_DTYPE_BYTES.get(dtype)
        if size is None or not isinstance(count, int):
            return None
        total += size * count
    return total or None


def _where(endpoint: str, repo_id: str) -> str:
    return f"{endpoint.rstrip('/')}/{repo_id}"


def _failure(err: Exception, repo_id: str, revision: str | None, endpoint: str) -> HubError:
    url = _where(endpoint, repo_id)
    if isinstance(err, GatedRepoError):
        return HubError(HubFailure.GATED, f"{repo_id} is gated on {endpoint}: accept its licence at {url} and set "
                        f"HF_TOKEN to a token with access (or log in with `hf auth login`)")
    if isinstance(err, RevisionNotFoundError):
        return HubError(HubFailure.NO_SUCH_REVISION, f"{repo_id} has no revision {revision!r} on {endpoint}: pin a "
                        f"branch, tag or commit it has ({url}/commits/main)")
    if isinstance(err, RepositoryNotFoundError):
        return HubError(HubFailure.NO_SUCH_REPO, f"{repo_id} is not a model repository on {endpoint} (or it is "
                        f"private: set HF_TOKEN to a token that can read it)")
    if isinstance(err, EntryNotFoundError) and not isinstance(err, LocalEntryNotFoundError):
        return HubError(HubFailure.NO_CONFIG, f"{repo_id} has no config.json on {endpoint} (a GGUF repository? point "
                        f"model: at the downloaded .gguf file)")
    if isinstance(err, OfflineModeIsEnabled):
        return HubError(HubFailure.UNREACHABLE, f"the Hub was not asked for {repo_id}: huggingface_hub is in offline "
                        f"mode (HF_HUB_OFFLINE)")
    status = err.response.status_code if isinstance(err, HfHubHTTPError) and err.response is not None else None
    why = f"HTTP {status}" if status else (str(err).splitlines()[0] if str(err) else type(err).__name__)
    return HubError(HubFailure.UNREACHABLE, f"the Hub at {endpoint} did not answer for {repo_id} ({why})")


def fetch(repo_id: str, revision: str | None, *, endpoint: str, token: str | None, cache_dir: Path,
          facts_dir: Path, timeout_s: float) -> Fetched:
    """``config.json`` (and the index) of ``repo_id`` at ``revision`` (default ``main``), fetched into
    ``cache_dir``; a ``HubError`` when the Hub does not give them."""
    api = HfApi(endpoint=endpoint, token=token)
    try:
        info = api.model_info(repo_id, revision=revision, timeout=timeout_s)
        config = Path(hf_hub_download(repo_id, "config.json", revision=revision, cache_dir=cache_dir,
                                      endpoint=endpoint, token=token, etag_timeout=timeout_s))
        commit = config.parent.name
        files = {s.rfilename for s in info.siblings or ()}
        weight_bytes = None
        for index in INDEX_FILES:
            if index in files:
                hf_hub_download(repo_id, index, revision=commit, cache_dir=cache_dir, endpoint=endpoint,
                                token=token, etag_timeout=timeout_s)
                break
        else:
            summary = info.safetensors
            weight_bytes = _parameter_bytes(summary.parameters) if summary is not None else None
            if weight_bytes is not None:
                write_weights_record(facts_dir, repo_id, commit, weight_bytes)
    except PermissionError:
        raise  # a cache folder this user cannot write: the caller fetches into the tool's own cache instead
    except Exception as err:  # typed Hub answers, and the transport's own errors (httpx or requests by release)
        raise _failure(err, repo_id, revision, endpoint) from None
    return Fetched(repo_id, commit, config.parent, weight_bytes)
