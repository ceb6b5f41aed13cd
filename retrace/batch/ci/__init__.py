"""Mesa's trace CI, run by retrace: traces description files in, piglit's results out.

    traces-*.yml ─► description.py ─► jobs.py ─► retrace.batch (jobs, DuckDB) ─► results.py
    (both layouts,   (checked, per    (a job per   (profile + last-frame        (results.json.bz2,
     labels)          device)          trace)       snapshot, checksum.py)       images, JUnit)

`retrace batch FILE.yml --device NAME` plans one batch job per trace expected
on the device (the others, and those labelled skip, are recorded as skipped),
finds or downloads the traces (`download.py`, into `--db-path`), and each job
profiles the trace and snapshots its last frame in child processes, so a
driver crash fails one trace, named by its call. `update.py` writes new
checksums back into the file (`--update-checksums`), keeping its comments
and order. ruamel.yaml is the optional extra ``ci``.
"""
