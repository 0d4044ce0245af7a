"""``config``: does the release take the command line (its own parser, rebuilt from its wheel, flag by flag)
and accept what the line, the model and the layout make of its configuration (its config-time refusals)?

The check itself is ``pytest_gpulayout/rules/config.py``; this module is its item in the suite, one per
deployment (``checks/test_config.py::test_config[<deployment>]``). A team's own check is a module like this
one beside the manifest (README.md, "Your own checks").
"""

import pytest


@pytest.mark.gpulayout("config")
def test_config(gpulayout_check):
    gpulayout_check("config")
