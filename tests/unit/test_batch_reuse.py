"""Which run a resumed batch reuses (`retrace.batch.schedule.changed`): only one measured on
the same trace, with the same options, by the same retrace, on the same driver; what
changed is said in words."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from retrace.batch.database import Recorded
from retrace.batch.job import Job
from retrace.batch.schedule import changed
from retrace.profile.metadata import TraceFile

DRIVER = {"env": {"GALLIUM_DRIVER": "llvmpipe"}, "files": [["/x/swrast_dri.so", 10, 1]],
          "renderer": "llvmpipe", "version": "4.5"}  # fmt: skip
JOB = Job("t.trace", 0, TraceFile("/t.trace", 5, "a" * 64), ("--pframes", "opengl: GPU Duration"),
          driver=json.dumps(DRIVER))  # fmt: skip


def recorded(job: Job = JOB, **settings: object) -> Recorded:
    return Recorded(job.trace.sha256, {**json.loads(job.settings()), **settings}, "ok", "")


def driver(**fields: object) -> dict:
    return {**DRIVER, **fields}


@pytest.mark.parametrize(
    ("record", "why"),
    [
        (recorded(), None),
        (replace(recorded(), sha256="b" * 64), "the trace changed"),
        (recorded(retrace="0.0.1"), "retrace changed (version 0.0.1 to "),
        (recorded(retrace=None), "retrace changed (version unrecorded to "),
        (recorded(driver=driver(env={})), "the driver changed (GALLIUM_DRIVER)"),
        (recorded(driver=driver(files=[["/x/swrast_dri.so", 10, 2]])),
         "the driver changed (swrast_dri.so)"),
        (recorded(driver=driver(renderer="softpipe")), "the driver changed (GL_RENDERER)"),
        (recorded(profile=["--pframes", "opengl: CPU Duration"]), "the options changed"),
    ],
)  # fmt: skip
def test_a_recorded_run_is_reused_only_if_nothing_changed(record, why):
    found = changed(record, JOB)
    assert found == why if why is None else found.startswith(why)
