"""Sub-commands of the ``lazyconv`` CLI, one module each.

Each module defines ``register(subparsers)``, which adds its sub-parser and sets
``handler=run`` (a function ``run(args) -> int``) with ``set_defaults``. Modules import heavy
dependencies (Spark, matplotlib) inside ``run``, so ``lazyconv --help`` stays fast.
"""
