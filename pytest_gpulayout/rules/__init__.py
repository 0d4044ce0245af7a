"""The static checks: one module per concern, each a function ``(dep, machine, model) -> Finding``.

They read frozen data (no NVML, no processes, no files), which is what lets every rule be tested from
snapshots on a machine without a GPU. What the host they run on would change (the installed engine
version when the deployment pins none, the engine variables it would inherit) arrives as a ``Host``
argument, read once at the edges (``host.py``); the default is the bare host.
``evaluate.py`` runs them in order.
"""
