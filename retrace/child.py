"""The command line of a child Python that runs this very retrace.

`python -m retrace` in a child would import whatever `retrace` its working directory
holds first: run from the folder a clone sits in, `./retrace/` (the clone, without an
``__init__.py`` at its top) shadows the installed package, and every child fails to
import. So a child gets the parent's import path (absolute, its working directory
dropped unless the parent had it) before it imports anything, and runs the module from
there as `-m` would.
"""

from __future__ import annotations

import json
import os
import sys

# sys.argv[1]: the parent's sys.path as JSON; sys.argv[2]: the module to run as __main__
_BOOTSTRAP = (
    "import json, runpy, sys; sys.path[:] = json.loads(sys.argv.pop(1)); "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


def python_command(module: str = "retrace", *args: str) -> list[str]:
    """`python -m MODULE ARGS`, importing what this process imports."""
    path = [os.path.abspath(entry) for entry in sys.path]  # ("": the parent's cwd)
    return [sys.executable, "-c", _BOOTSTRAP, json.dumps(path), module, *args]
