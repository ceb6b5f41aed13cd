"""Comparing and condensing profiles: `retrace diff` and `retrace summary`.

A profile is only useful against another one ("did this driver or app build
get slower, and where?"), and profiles come from retrace and from glretrace
alike, so both commands read the TSV text both programs print. `load` reads
and lines up runs, `stats` holds the significance test, `diff` and `summary`
compute, `render` prints, and `command` holds the options.
"""
