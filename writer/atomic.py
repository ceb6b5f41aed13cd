"""Files written whole or not at all: to a temporary beside the target, renamed over it once
complete, so that a reader never sees half a file. The temporary is the writer's business:
an error names the file the user asked for, and no temporary is left behind."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import IO, Any


@contextlib.contextmanager
def replaced(path: str, mode: str = "w") -> Iterator[IO[Any]]:
    """An open stream whose content becomes `path` when the block ends without an error."""
    temporary = f"{path}.tmp{os.getpid()}"
    try:
        with open(temporary, mode, encoding=None if "b" in mode else "utf-8") as stream:
            yield stream
        os.replace(temporary, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise OSError(e.errno, e.strerror, path) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
