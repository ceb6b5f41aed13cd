#!/usr/bin/env bash
# The README's first command: install retrace from this checkout on a fresh Debian or
# Ubuntu machine that has python3, pip, gcc and python3-dev, into .venv.
#
#     bash tools/setup.sh [EXTRAS]     # EXTRAS: pyproject.toml's, e.g. test,farm,ci
#
# 1. The Debian packages a replay loads at run time (libEGL, Mesa's driver, the GL
#    libraries): installed when missing if run as root, else their apt-get line is printed
#    and nothing else is done (python -m retrace.debian, run from this checkout).
# 2. .venv: Debian's python3 makes one without pip unless python3-venv is installed, so
#    pip is then installed into it by the system's pip (which PEP 668 keeps out of the
#    system's own site-packages).
# 3. retrace, editable, with EXTRAS; then .venv/bin/retrace runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m retrace.debian --install

if [ ! -x .venv/bin/pip ]; then
    if ! python3 -m venv .venv >/dev/null 2>&1; then
        python3 -m venv --clear --without-pip .venv
        python3 -m pip --python .venv/bin/python install -q pip
    fi
fi
.venv/bin/pip install -q -e ".${1:+[$1]}"
echo "retrace: installed in .venv (. .venv/bin/activate puts retrace on PATH)" >&2
