"""The pieces of ``bench/run.py``: processes, load generation, slow streams, memory soak, reports."""
