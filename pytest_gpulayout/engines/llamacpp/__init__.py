"""llamacpp: everything the checks know about this engine; ``engine.py`` holds its ``Engine``."""
