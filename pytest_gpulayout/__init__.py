"""pytest-gpulayout: will this TP/PP/DP layout start and serve on this machine?

This module is imported by pytest at start-up through the ``pytest11`` entry point's package, so it
must stay free of heavy imports (no NVML, no YAML): everything else loads lazily once ``--gpulayout``
is given or a CLI verb runs.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["GpuLayoutWarning", "__version__"]


class GpuLayoutWarning(UserWarning):
    """A layout that will start but is worse than it could be (slow link, thin headroom, ...).

    Warnings do not fail a run unless ``--gpulayout-strict`` or
    ``-W error::pytest_gpulayout.GpuLayoutWarning`` is given.
    """
