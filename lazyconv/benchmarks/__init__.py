"""Benchmarks behind ``lazyconv bench`` and the scripts in ``bench/``.

Each module has ``main(argv) -> int`` and compares implementations in the same run (ratios, not
absolute times: the machines are shared and noisy), printing a table.
"""
