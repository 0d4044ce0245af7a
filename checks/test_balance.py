"""``balance``: SGLang's TP memory-balance rule and its headroom, vLLM's free-memory rule at start-up, lopsided
DP pools.

The check itself is ``pytest_gpulayout/rules/balance.py``; this module is its item in the suite, one per deployment
(``checks/test_balance.py::test_balance[<deployment>]``). A team's own check is a module like this one beside
the manifest (README.md, "Your own checks").
"""

import pytest


@pytest.mark.gpulayout("balance")
def test_balance(gpulayout_check):
    gpulayout_check("balance")
