"""A Hugging Face Hub on 127.0.0.1 for the resolution tests: the API answers ``huggingface_hub`` reads
(``/api/models/<repo>[/revision/<rev>]``, ``/<repo>/resolve/<rev>/<file>`` with the ``X-Repo-Commit`` and
``ETag`` headers, the ``X-Error-Code`` of a missing repository, revision or file, a gated repository), and
a log of every request, so that a test can say what was asked and that no weights were."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


@dataclass
class Repo:
    commit: str
    files: dict[str, bytes]
    #: the Hub's own count of the safetensors parameters by dtype (``model_info().safetensors``)
    safetensors: Mapping[str, int] | None = None
    gated: bool = False
    #: other names of ``commit`` (branches, tags)
    refs: tuple[str, ...] = ("main",)


@dataclass
class Hub:
    repos: dict[str, Repo]
    token: str = "hf_test_token"
    requests: list[tuple[str, str]] = field(default_factory=list)
    url: str = ""


_API = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)(?:/revision/(?P<rev>[^/]+))?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+|[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes = b"", headers: Mapping[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status: int, code: str, commit: str | None = None) -> None:
            headers = {"X-Error-Code": code, "X-Error-Message": code}
            if commit:
                headers["X-Repo-Commit"] = commit
            self._send(status, json.dumps({"error": code}).encode(), headers)

        def _repo(self, name: str, rev: str | None) -> tuple[Repo | None, str | None]:
            repo = hub.repos.get(name)
            if repo is None:
                return None, None
            rev = rev or "main"
            if rev in repo.refs or repo.commit.startswith(rev):
                return repo, repo.commit
            return repo, None

        def _authorised(self) -> bool:
            return self.headers.get("Authorization", "") == f"Bearer {hub.token}"

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            path = unquote(self.path.split("?", 1)[0])
            hub.requests.append((self.command, path))
            m = _API.match(path)
            if m is not None:
                repo, commit = self._repo(m.group("repo"), m.group("rev"))
                if repo is None:
                    return self._error(401, "RepoNotFound")
                if commit is None:
                    return self._error(404, "RevisionNotFound")
                info: dict[str, object] = {"id": m.group("repo"), "sha": commit, "gated": "manual" if repo.gated
                                           else False, "siblings": [{"rfilename": f} for f in sorted(repo.files)]}
                if repo.safetensors is not None:
                    info["safetensors"] = {"parameters": dict(repo.safetensors),
                                           "total": sum(repo.safetensors.values())}
                return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})
            m = _RESOLVE.match(path)
            if m is None:
                return self._error(404, "NotFound")
            repo, commit = self._repo(m.group("repo"), m.group("rev"))
            if repo is None:
                return self._error(401, "RepoNotFound")
            if commit is None:
                return self._error(404, "RevisionNotFound")
            if repo.gated and not self._authorised():
                return self._error(403, "GatedRepo")
            body = repo.files.get(m.group("file"))
            if body is None:
                return self._error(404, "EntryNotFound", commit)
            etag = hashlib.sha1(body).hexdigest()
            self._send(200, body, {"X-Repo-Commit": commit, "ETag": f'"{etag}"', "Content-Type": "application/json"})

    return Handler


@contextmanager
def serve(repos: Mapping[str, Repo]) -> Iterator[Hub]:
    """A Hub serving ``repos`` on 127.0.0.1 (a free port) until the block ends."""
    hub = Hub(dict(repos))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
