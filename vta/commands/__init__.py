"""Subcommands of ``vta``: each module defines ``register(subparsers)``."""
