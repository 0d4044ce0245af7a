"""The static checks: one module per concern, each a pure function ``(dep, machine, model) -> Finding``.

They read frozen data only (no NVML, no processes), which is what lets every rule be tested from
snapshots on a machine without a GPU. ``evaluate.py`` runs them in order.
"""
