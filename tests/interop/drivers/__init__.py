"""Client drivers: one small program per client library, run as a subprocess by the interop tests.

Each takes one job (JSON, first argument) and writes JSON lines to stdout; see :mod:`.common`.
"""
