"""``heads``: do attention heads, KV heads, PP layers, experts and quantized widths divide the way the engine
requires, and does the release build the model on these GPUs?

The check itself is ``pytest_gpulayout/rules/heads.py``; this module is its item in the suite, one per deployment
(``checks/test_heads.py::test_heads[<deployment>]``). A team's own check is a module like this one beside
the manifest (README.md, "Your own checks").
"""

import pytest


@pytest.mark.gpulayout("heads")
def test_heads(gpulayout_check):
    gpulayout_check("heads")
