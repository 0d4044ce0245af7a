"""``startup``: launch the engine briefly with the deployment's flags, read the KV pool it really allocated,
stop it and leave nothing behind (opt-in: --gpulayout-launch).

The check itself is ``pytest_gpulayout/rules/startup.py``; this module is its item in the suite, one per deployment
(``checks/test_startup.py::test_startup[<deployment>]``). A team's own check is a module like this one beside
the manifest (README.md, "Your own checks").
"""

import pytest


@pytest.mark.gpulayout("startup")
def test_startup(gpulayout_check):
    gpulayout_check("startup")
