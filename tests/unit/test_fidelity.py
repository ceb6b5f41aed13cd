"""How departures from the trace are counted, without a replay."""

from __future__ import annotations

from collections import Counter

from retrace.replay.fidelity import Fidelity


def test_a_profile_reports_the_departures_of_every_pass():
    """Passes differ (only a Pixels Drawn pass leaves the program's occlusion queries
    out): the report is every departure at its largest count, first seen earliest."""
    pixels_pass = Fidelity(
        {"glFoo": (2, "unsupported")},
        left_out_queries=Counter({"GL_SAMPLES_PASSED": 10}),
        unconditional_renders=3,
        first_query_mismatch=(50, 1, 2),
        query_mismatches=1,
    )
    times_pass = Fidelity(
        {"glFoo": (2, "unsupported"), "glBar": (1, "no context")},
        lost_memcpys=4,
        first_lost=0x1000,
        gl_errors=Counter({"GL_INVALID_ENUM": 1}),
        first_error_frame=7,
        first_query_mismatch=(20, 5, 6),
        query_mismatches=2,
    )
    for worst in (pixels_pass.worst(times_pass), times_pass.worst(pixels_pass)):
        assert worst.skipped == {"glFoo": (2, "unsupported"), "glBar": (1, "no context")}
        assert worst.left_out_queries == Counter({"GL_SAMPLES_PASSED": 10})
        assert (worst.unconditional_renders, worst.lost_memcpys, worst.first_lost) == (3, 4, 0x1000)
        assert worst.gl_errors == Counter({"GL_INVALID_ENUM": 1}) and worst.first_error_frame == 7
        assert (worst.query_mismatches, worst.first_query_mismatch) == (2, (20, 5, 6))
        assert not worst.faithful
