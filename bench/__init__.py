"""The memoryui benchmark: ``python -m bench.run`` (``make bench``).

See ``bench/README.md`` for what it measures and ``bench/run.py`` for the
steps of a run.
"""
