"""The legacy profiler's selections and draw matching, without a replay."""

from __future__ import annotations

import numpy as np

from retrace.profile import legacy
from retrace.profile.legacy import legacy_selections
from retrace.vocabulary import Boundary


def test_selections():
    assert legacy_selections(cpu=True, gpu=False, pixels=False, memory=False) == {
        Boundary.CALL: "opengl: CPU Start, CPU Duration"
    }
    assert legacy_selections(cpu=False, gpu=True, pixels=True, memory=True) == {
        Boundary.CALL: "opengl: VSIZE Start, VSIZE Duration, RSS Start, RSS Duration",
        Boundary.DRAWCALL: "opengl: GPU Start, GPU Duration, Pixels Drawn",
    }
    # no call option: CPU Duration carries the call rows (printed as 0)
    assert legacy_selections(cpu=False, gpu=False, pixels=True, memory=False) == {
        Boundary.CALL: "opengl: CPU Duration",
        Boundary.DRAWCALL: "opengl: Pixels Drawn",
    }


def test_draws_matched_by_walking_the_call_numbers():
    nos = np.array([3, 5, 8, 9, 12])
    assert legacy._draw_mask(nos, np.array([5, 9, 20])).tolist() == [0, 1, 0, 1, 0]
    assert legacy._draw_mask(nos, np.array([], np.int64)).tolist() == [0] * 5
    # repeated numbers (not in real traces): the walk pairs them in order
    assert legacy._draw_mask(np.array([5, 5, 6]), np.array([5, 6])).tolist() == [1, 0, 1]
