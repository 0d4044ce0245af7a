"""One module per ``gpulayout`` verb: ``add_arguments(parser)`` and ``run(args) -> int``."""
