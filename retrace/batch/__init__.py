"""`retrace batch`: profile a corpus of traces, on one machine or a Ray cluster.

The flow is the one of a single profile, repeated and collected:

    manifest.toml ─► manifest.py ─► jobs ─► executors.py ─► job.py ─► database.py
    (traces, globs,   (validated,    (trace    (local: one at a  (one isolated   (DuckDB: runs,
     selections,       expanded)      x run)    time; Ray: tasks  `python -m      metadata, values,
     expectations)                              on the nodes      retrace`, with   MD5 checks)
                                                with the resource) a timeout)

`schedule.py` drives it: it skips what the database already holds (a re-run
resumes), hands the rest to an executor, retries failed jobs up to their bound
and records each outcome as it arrives, so an interrupted batch keeps every
finished job. `shards.py` picks this machine's share of the jobs for CI
matrices and Slurm arrays; shard databases are merged with `retrace batch
merge`. `corpus.py` compares two builds trace by trace with `retrace diff`'s
own statistics (`retrace.compare.diff`), and `junit.py` writes both the batch
and the comparison as JUnit XML for CI.

A Mesa traces description file (``traces-*.yml``) is a manifest too:
`ci/` plans its traces for one device as jobs whose run 0 also checks the
last frame's checksum as piglit's replayer does (`lastframe.py`), and writes
piglit's results.json.bz2 from the database.

DuckDB and Ray are the optional extra ``farm``, ruamel.yaml the extra ``ci``;
each is imported only inside the feature that needs it, so `retrace` itself
starts without them.
"""
