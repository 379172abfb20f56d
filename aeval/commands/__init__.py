"""One module per CLI sub-command: ``add_arguments(parser)`` and ``main(args) -> int``.

These are thin: they turn flags into calls on the stage modules and print.
"""
