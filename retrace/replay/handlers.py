"""Signal handlers installed for a while, and what was there before put back as it was.

`signal.signal` returns the previous handler as Python recorded it: None for one that C
code had installed before Python started (a tracer preloaded into retrace, such as
apitrace's), which it cannot reinstate (putting that None back raised TypeError once the
work was done), and SIG_DFL for one installed since (by a program that embeds the Python
API), which putting back would silently drop. So each signal's action is saved as the C
library holds it (`_guard.action`) and reinstated so, once Python's record of it is back.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from retrace.replay import _guard

Handler = Callable[[int, Any], object]


@contextlib.contextmanager
def handling(handlers: Mapping[int, Handler]) -> Iterator[None]:
    """Handle each signal of `handlers` with its handler inside the block; then the
    handlers before, Python's or not."""
    actions = {number: _guard.action(number) for number in handlers}
    previous = {number: signal.signal(number, handler) for number, handler in handlers.items()}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
            _guard.set_action(number, actions[number])
