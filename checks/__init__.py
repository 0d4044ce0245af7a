"""The preflight suite run by ``pytest --gpulayout``: one module per check, parametrized over the
manifest's deployments by the plugin. A new check is a rule in ``pytest_gpulayout/rules/`` plus a
three-line module here."""
