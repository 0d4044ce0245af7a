"""Deployment artifacts read as deployments (issue 22): engine command lines in shell scripts and text
(``commands.py``), Kubernetes objects (``kubernetes.py``), each turned into the same ``Deployment`` the
manifest loader builds (``build.py``), plus the ``deploy`` check of what only the artifact can get wrong."""
