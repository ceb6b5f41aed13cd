#!/usr/bin/env bash
# record_games.sh - record short traces of three real games for benchmarks/trim.py, whose
# legacy GL (display lists, textures bound once and reused, client arrays, matrix stacks,
# mipmap chains) the trim's analysis must follow (too big for git: $GAMES, default
# /work/corpus/games):
#   extremetuxracer   Extreme Tux Racer's title screens (etr)
#   armagetronad      Armagetron Advanced's menu over its demo game
#   chromium-bsu      Chromium B.S.U.'s menu
# Same environment as record.sh: a private Xvfb, Mesa's llvmpipe, an empty HOME.
# Usage: traces/corpus/record_games.sh     (needs root only to install packages)
#        GAMES=/tmp/games traces/corpus/record_games.sh
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GAMES=${GAMES:-/work/corpus/games}
mkdir -p "$GAMES"

log() { printf 'record_games.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
. "$HERE/../record_lib.sh"

install_debs apitrace xvfb extremetuxracer armagetronad chromium-bsu
WORK=/tmp/retrace-record-games
program_environment "$WORK"

# rec NAME SECONDS CMD...: trace CMD into $GAMES, stopped with SIGINT after SECONDS (each
# trace some 10-30 MB)
rec() { rec_into "$GAMES" "$@"; }

rec extremetuxracer 8 etr
rec armagetronad 15 armagetronad
rec chromium-bsu 15 chromium-bsu --window --vidmode 1 --noaudio
