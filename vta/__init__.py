"""The ``vta`` command line: the top of the stack (imports everything, imported by nothing)."""
