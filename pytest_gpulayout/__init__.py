"""pytest-gpulayout: will this TP/PP/DP layout start and serve on this machine?

This module is imported by pytest at start-up through the ``pytest11`` entry point's package, so it
must stay free of heavy imports (no NVML, no YAML): everything else loads lazily once ``--gpulayout``
is given or a CLI verb runs.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

#: what a team's own check reads (README.md, "Your own checks"), loaded on first use: importing this package
#: costs pytest nothing
_LAZY = {
    "Finding": "pytest_gpulayout.findings", "Status": "pytest_gpulayout.findings",
    "PlacementFacts": "pytest_gpulayout.rules.placement", "HeadsFacts": "pytest_gpulayout.rules.heads",
    "BalanceFacts": "pytest_gpulayout.rules.balance", "LinksFacts": "pytest_gpulayout.rules.links",
    "KvPoolFacts": "pytest_gpulayout.rules.kv_pool", "ClusterFacts": "pytest_gpulayout.rules.cluster",
    "StartupFacts": "pytest_gpulayout.launch.facts",
}

__all__ = ["GpuLayoutWarning", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_gpulayout' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


class GpuLayoutWarning(UserWarning):
    """A layout that will start but is worse than it could be (slow link, thin headroom, ...).

    Warnings do not fail a run unless ``--gpulayout-strict`` or
    ``-W error::pytest_gpulayout.GpuLayoutWarning`` is given.
    """
