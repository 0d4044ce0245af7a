"""Shell text as an artifact: a script, a Slurm batch file, a README's command lines (``inputs/shell.py`` reads
it as the shell runs it; ``artifacts/commands.py`` picks the engine invocations out)."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpulayout.artifacts import slurm
from pytest_gpulayout.artifacts.commands import find_in_text
from pytest_gpulayout.artifacts.reader import Artifact, Read, beside


@dataclass(frozen=True)
class ShellReader:
    """Every engine command a file of shell text runs (a YAML file is the other readers')."""

    kind: str = "shell text with vllm serve / python -m sglang.launch_server / llama-server"

    def read(self, artifact: Artifact) -> Read:
        if artifact.docs is not None or slurm.is_batch(artifact.text) or artifact.path.suffix == ".pbtxt":
            return Read()  # a YAML file is the other readers', a batch script the Slurm one's, a model config Triton's
        found = find_in_text(artifact.text, artifact.path.name, files=beside(artifact.path.parent))
        return Read(tuple((i, None) for i in found))


READER = ShellReader()
