#!/usr/bin/env bash
# record_long.sh - record the long real-program traces that benchmarks/trim.py trims a few
# frames out of (too big for git: $LONG, default /work/corpus/long).
#
# record.sh's corpus holds short cuts (3 to 93 frames), whose frames use most of what
# the program loaded; `retrace trim` is for cutting frames out of long recordings:
#   glmark2-scenes             36 s of six glmark2 scenes (build, texture, shading, bump,
#                              effect2d, jellyfish; 320x240), each loading its own data
#   neverball-40s              40 s of Neverball's title screen (GL 1.x/2.x, VBOs)
#   gtk4-widget-factory-25s    25 s of GTK 4's widget factory (GL renderer, GLX)
# Same environment as record.sh: a private Xvfb, Mesa's llvmpipe, an empty HOME.
# Usage: traces/corpus/record_long.sh     (needs root only to install packages)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LONG=${LONG:-/work/corpus/long}
mkdir -p "$LONG"

log() { printf 'record_long.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
. "$HERE/../record_lib.sh"

install_debs apitrace xvfb glmark2-x11 neverball gtk-4-examples
WORK=/tmp/retrace-record-long
program_environment "$WORK"

# rec NAME SECONDS CMD...: trace CMD into $LONG, stopped with SIGINT after SECONDS if still running
rec() { rec_into "$LONG" "$@"; }

rec glmark2-scenes 45 glmark2 -s 320x240 -b build:duration=6 -b texture:duration=6 \
    -b shading:duration=6 -b bump:duration=6 -b effect2d:duration=6 -b jellyfish:duration=6
rec neverball-40s 40 neverball
rec gtk4-widget-factory-25s 25 env GDK_BACKEND=x11 GSK_RENDERER=gl GDK_DEBUG=gl-glx \
    gtk4-widget-factory
