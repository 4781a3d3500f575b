"""Benchmarks of GUIDE § 5: the "N-item turn" across turnplan and comparable agent frameworks.

Run ``python -m bench`` (or ``python -m bench --quick``). Every system is driven by a scripted
oracle model that reads only the request it is sent and takes the cheapest path the system
allows; the same oracle answers over real HTTP (for calls and tokens) and in process (for
framework overhead). See ``bench/README.md``.
"""
