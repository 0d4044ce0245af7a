"""``placement``: are the GPUs the layout needs visible, whole (no other tenants), not MIG slices, alike inside a
TP group, and enough (TP x PP x DP)?

The check itself is ``pytest_gpulayout/rules/placement.py``; this module is its item in the suite, one per deployment
(``checks/test_placement.py::test_placement[<deployment>]``). A team's own check is a module like this one beside
the manifest (README.md, "Your own checks").
"""

import pytest


@pytest.mark.gpulayout("placement")
def test_placement(gpulayout_check):
    gpulayout_check("placement")
