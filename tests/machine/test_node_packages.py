"""What a node's probe reports of its Python environment: the packages the checks read (the cluster's torch and
Ray, and the ones the releases' import-time refusals need: ``engines/packages.py``), installed or not."""

from __future__ import annotations

from importlib import metadata

import pytest

from pytest_gpulayout.engines.packages import node_packages
from pytest_gpulayout.machine.node_probe import PROBED, package_versions


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@pytest.mark.parametrize("dist", ["opentelemetry-sdk", "flashinfer-python", "ray", "torch"])
def test_the_probe_reports_each_package_the_refusals_read_installed_or_not(dist: str) -> None:
    """A probed package is a key with its version or None (probed and absent), never left out: "absent" can then
    refuse where the engine runs in the probed environment, and a package not probed stays unknown."""
    got = package_versions({})
    assert dist in PROBED
    assert dist in got and got[dist] == _version(dist)


def test_a_package_one_node_lacks_is_absent_for_the_deployment() -> None:
    nodes = {"a": package_versions({}), "b": {**package_versions({}), "opentelemetry-sdk": None}}
    assert node_packages(nodes)["opentelemetry-sdk"] is None
