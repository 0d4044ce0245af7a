"""``kv_pool``: the KV pool predicted the way the engine release computes it, against require.kv_tokens and
require.concurrency.

The check itself is ``pytest_gpulayout/rules/kv_pool.py``; this module is its item in the suite, one per deployment
(``checks/test_kv_pool.py::test_kv_pool[<deployment>]``). A team's own check is a module like this one beside
the manifest (README.md, "Your own checks").
"""

import pytest


@pytest.mark.gpulayout("kv_pool")
def test_kv_pool(gpulayout_check):
    gpulayout_check("kv_pool")
