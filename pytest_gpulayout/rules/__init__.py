"""The static checks: one module per concern, each a function ``(dep, machine, model) -> Finding``.

They read frozen data (no NVML, no processes, no files), which is what lets every rule be tested from
snapshots on a machine without a GPU. Two facts come from the host they run on, on purpose, because
the engine launched from the same place would see them too: the installed engine version when the
deployment pins none (``engines.resolve_version``, read from package metadata, never by importing the
engine), and the long-context override variables the engine would inherit (``kv_pool``).
``evaluate.py`` runs them in order.
"""
