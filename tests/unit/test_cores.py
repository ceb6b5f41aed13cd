"""How many cores are idle: a task runnable for a moment is not taken for load."""

import pytest

from retrace import cores


@pytest.mark.parametrize(
    ("looks", "idle", "seen"),
    [
        ([1.0, 0.0, 0.0], 1.0, 1),  # idle at once: one look
        ([0.0, 1.0, 0.0], 1.0, 2),  # a task that was gone half a millisecond later
        ([-1.0, 0.0, 0.5], 0.5, 3),  # busy every time: the idlest of LOOKS
    ],
)
def test_idle_looks_again_where_no_core_was(monkeypatch, looks, idle, seen):
    taken = iter(looks)
    monkeypatch.setattr(cores, "_idle_now", lambda: next(taken))
    assert len(looks) == cores.LOOKS
    assert cores.idle() == idle
    assert len(looks) - len(list(taken)) == seen


def test_idle_now_counts_this_process_as_runnable():
    """A reading of this machine: this process runs, so at most usable - 1 are idle."""
    assert cores._idle_now() <= cores.usable() - 1
