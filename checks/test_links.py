"""``links``: is each TP group joined by NVLink/NVSwitch, or is this a PCIe, cross-socket or cross-host TP that
should be PP?

The check itself is ``pytest_gpulayout/rules/links.py``; this module is its item in the suite, one per deployment
(``checks/test_links.py::test_links[<deployment>]``). A team's own check is a module like this one beside
the manifest (README.md, "Your own checks").
"""

import pytest


@pytest.mark.gpulayout("links")
def test_links(gpulayout_check):
    gpulayout_check("links")
