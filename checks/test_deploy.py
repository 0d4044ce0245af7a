"""``deploy``: what only the artifact can get wrong (GPUs per pod, the group against the world, /dev/shm, the
master's address, RDMA, an image tag that names no release); only for a deployment read from an artifact.

The check itself is ``pytest_gpulayout/rules/deploy.py``; this module is its item in the suite, one per deployment
(``checks/test_deploy.py::test_deploy[<deployment>]``). A team's own check is a module like this one beside
the manifest (README.md, "Your own checks").
"""

import pytest


@pytest.mark.gpulayout("deploy")
def test_deploy(gpulayout_check):
    gpulayout_check("deploy")
