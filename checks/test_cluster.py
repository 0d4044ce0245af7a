"""``cluster``: on several hosts: the same engine, torch, Python and Ray on every node, the model present and
identical on each, InfiniBand rather than sockets, /dev/shm large enough?

The check itself is ``pytest_gpulayout/rules/cluster.py``; this module is its item in the suite, one per deployment
(``checks/test_cluster.py::test_cluster[<deployment>]``). A team's own check is a module like this one beside
the manifest (README.md, "Your own checks").
"""

import pytest


@pytest.mark.gpulayout("cluster")
def test_cluster(gpulayout_check):
    gpulayout_check("cluster")
