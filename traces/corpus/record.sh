#!/usr/bin/env bash
# record.sh - re-record the corpus of third-party program traces from scratch.
#
# What it does:
#   1. Installs what is missing (Debian 12 packages: apitrace,
#      apitrace-tracers, xvfb, mesa-utils, ffmpeg, mpv, qml-qt6 and its
#      QtQuick modules, qtdeclarative5-examples, gtk-4-examples, kitty, love,
#      xscreensaver-gl and -gl-extra, neverball, warzone2100, glmark2-x11,
#      piglit).
#   2. Starts its own Xvfb on a free display (stopped again on exit), forces
#      Mesa's llvmpipe software driver and gives the programs a private, empty
#      HOME, so neither the machine's GPU nor its users' settings leak in.
#   3. Traces each program with apitrace 11.1 (Snappy container).  Programs
#      that stop by themselves (mpv --frames, a QML Timer, LOVE's own frame
#      counter, kitty when its shell exits, glmark2 nframes) are traced
#      whole; the others are stopped with SIGINT after a few seconds
#      (`timeout -s INT`, which leaves the last call incomplete) and trimmed
#      with `apitrace trim --frames=0-N` to their first N+1 whole frames,
#      startup included (apitrace trim keeps no dependencies, so a cut must
#      start at call 0).
#   4. Writes the small cuts that are committed next to this script:
#      love-persistent (frames 0-2 without LOVE's ~90000 verbose
#      glGetStringi calls), qt6-qml (frames 0-2) and mpv-gpu (frames 0-3),
#      each checked to be under 1 MiB.
#
# The big traces go to $BIG (default /work/corpus/traces; the untrimmed
# recordings to $BIG/full); the cuts to $CUTS (default: this folder).
# compare.py then checks retrace against glretrace/eglretrace on them:
#     DISPLAY=:N compare.py $BIG/*.trace
#
# Re-recordings differ in bytes and, for programs stopped by time, in frame
# counts: animations follow the clock, and slow start-ups (warzone2100)
# vary.  Takes about 2 minutes on 2 cores.
# Usage: traces/corpus/record.sh     (needs root only to install packages)
#        BIG=/tmp/big CUTS=/tmp/cuts traces/corpus/record.sh
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIG=${BIG:-/work/corpus/traces}
CUTS=${CUTS:-$HERE}
mkdir -p "$BIG" "$BIG/full" "$CUTS"

log() { printf 'record.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
. "$HERE/../record_lib.sh"

# --------------------------------------------------------------------------
# 1. Dependencies
DEBS=(apitrace apitrace-tracers xvfb mesa-utils ffmpeg mpv qml-qt6
      qml6-module-qtquick qml6-module-qtquick-window
      qml6-module-qtqml-workerscript qtdeclarative5-examples gtk-4-examples kitty love
      xscreensaver-gl xscreensaver-gl-extra neverball warzone2100 glmark2-x11 piglit python3)
install_debs "${DEBS[@]}"
PIGLIT_BIN=$(dirname "$(dpkg -L piglit | grep '/piglit/bin/occlusion_query$' | sed -n 1p)")
XSS=/usr/libexec/xscreensaver
QT5_TEXTUREINTHREAD=$(dpkg -L qtdeclarative5-examples | grep '/textureinthread/textureinthread$' | sed -n 1p)
[[ -x $PIGLIT_BIN/bufferstorage-persistent && -x $XSS/hypertorus && -x $XSS/flurry ]] \
    || die "piglit tests or xscreensaver hacks not found"

# Package versions, for the README table.
dpkg-query -W -f='${Package}\t${Version}\n' "${DEBS[@]}" libgl1-mesa-dri >"$BIG/versions.tsv"

# --------------------------------------------------------------------------
# 2. Environment: private Xvfb, software rendering, private HOME
WORK=/tmp/retrace-record-corpus
program_environment "$WORK"
log "Xvfb on $DISPLAY, work dir $WORK"
ffmpeg -loglevel error -y -f lavfi -i testsrc2=size=320x240:rate=25 -t 2 \
    -pix_fmt yuv420p -c:v libx264 -preset ultrafast "$WORK/test.mkv"

# --------------------------------------------------------------------------
# 3. Tracing
frames_of() { apitrace info "$1" | sed -n 's/^ *"FramesCount": \([0-9]*\),$/\1/p'; }

# rec NAME API SECONDS FRAMES CMD...: trace CMD (SIGINT after SECONDS), then
# keep frames 0..FRAMES-1 (all of them when FRAMES is "all": the program
# stopped by itself).
rec() {
    local name=$1 api=$2 secs=$3 want=$4
    shift 4
    local full="$BIG/full/$name.trace"
    log "tracing $name: $*"
    rm -f "$full"
    local status=0
    timeout -s INT "$secs" apitrace trace --api "$api" -o "$full" "$@" \
        >"$WORK/$name.log" 2>&1 || status=$?
    [[ -s $full ]] || die "$name: no trace written (status $status): $(tail -n 5 "$WORK/$name.log")"
    local n
    n=$(frames_of "$full")
    ((n > 0)) || die "$name: no frames (status $status)"
    if [[ $want == all ]]; then
        ((status == 0)) || die "$name: program failed (status $status): $(tail -n 5 "$WORK/$name.log")"
        cp "$full" "$BIG/$name.trace"
    else
        ((n < want)) && want=$n
        apitrace trim --frames="0-$((want - 1))" -o "$BIG/$name.trace" "$full" >/dev/null 2>&1
    fi
    log "$name.trace: $(frames_of "$BIG/$name.trace") frames (of $n), $(stat -c %s "$BIG/$name.trace") bytes"
}

MPV=(mpv --no-config --vo=gpu --gpu-context=x11egl --hwdec=no --audio=no --frames=10
     --untimed --geometry=320x240 --opengl-pbo=yes --scale=ewa_lanczossharp --deband=yes)
rec mpv-gpu egl 60 all "${MPV[@]}" "$WORK/test.mkv"
rec mpv-gles egl 60 all "${MPV[@]}" --opengl-es=yes "$WORK/test.mkv"

# Qt Quick (Qt 6.4): threaded render loop, so two threads and shared contexts.
QSG_RHI_BACKEND=opengl rec qt6-qml gl 30 all /usr/lib/qt6/bin/qml "$HERE/src/rects.qml"

# Qt 5.15's textureinthread example: a second thread renders a logo with client-side
# vertex arrays into a texture of a context shared with the scene graph's.
rec qt5-textureinthread gl 6 30 "$QT5_TEXTUREINTHREAD"

# GTK 4.8: the "gl" GSK renderer (4.8 has no "ngl"); GLX because epoxy's EGL
# path aborts under egltrace.so (it looks for glXGetCurrentContext there).
GTK=(env GDK_BACKEND=x11 GSK_RENDERER=gl GDK_DEBUG=gl-glx)
rec gtk4-widget-factory gl 5 30 "${GTK[@]}" gtk4-widget-factory
rec gtk4-demo-shadertoy gl 5 5 "${GTK[@]}" gtk4-demo --run=shadertoy

# kitty: GL 3.3 core, instanced cell rendering; exits with its shell.
rec kitty gl 30 all kitty --config NONE -o font_size=11 -o initial_window_width=640 \
    -o initial_window_height=400 -o remember_window_size=no sh -c \
    'printf "\033[1;31mretrace\033[0m corpus: \033[42mkitty\033[0m\n"; ls -l --color=always /usr/lib/x86_64-linux-gnu | head -30; for i in 1 2 3 4 5 6 7 8 9 10; do printf "\033[3%dmline %d\033[0m\n" $((i%8)) $i; sleep 0.1; done; sleep 0.5'

# LOVE 11.4: persistent coherent glBufferStorage stream buffers, instancing.
rec love gl 30 all love "$HERE/src/love-sprites"

# Warzone 2100: GL 3.1 core; its start-up menu.
rec wz2100 gl 30 30 warzone2100 --window --resolution=640x480 --nosound

# xscreensaver 6 hacks use EGL on X11.
rec xss-hypertorus egl 3 30 "$XSS/hypertorus" -window
rec xss-glmatrix egl 3 30 "$XSS/glmatrix" -window
rec xss-flurry egl 3 30 "$XSS/flurry" -window  # client arrays drawn as GL_QUADS

# Neverball (SDL2, GL 1.x/2.x with VBOs): its title screen.
rec neverball gl 12 30 neverball

# glmark2 scenes not in traces/.
for scene in jellyfish terrain refract shadow ideas; do
    rec "glmark2-$scene" gl 60 all glmark2 -s 320x240 -b "$scene:nframes=8"
done

# piglit, in window mode (no -auto, so they swap once and then wait: SIGINT).
export PIGLIT_PLATFORM=glx
rec piglit-bufferstorage-persistent-draw-coherent gl 3 1 "$PIGLIT_BIN/bufferstorage-persistent" draw coherent
rec piglit-bufferstorage-persistent-read gl 3 1 "$PIGLIT_BIN/bufferstorage-persistent" read
for t in occlusion_query occlusion_query_order occlusion_query_meta_no_fragments \
         occlusion_query_meta_fragments occlusion_query_conform; do
    rec "piglit-$t" gl 3 1 "$PIGLIT_BIN/$t"
done

# --------------------------------------------------------------------------
# 4. Small cuts for the test suite
MAX_BYTES=$((1024 * 1024))
cut() {  # cut NAME SOURCE FRAMES [drop-glGetStringi]
    local name=$1 src=$2 frames=$3 drop=${4:-}
    local out="$CUTS/$name.trace"
    apitrace trim --frames="$frames" -o "$WORK/cut.trace" "$BIG/$src.trace" >/dev/null 2>&1
    if [[ -n $drop ]]; then
        # The verbose glGetStringi calls (skipped by every replayer) are most
        # of LOVE's bytes: keep all the other calls, by call number.
        apitrace dump --color=never -v --multiline=false "$WORK/cut.trace" | python3 -c '
import re, sys
keep = [int(m.group(1)) for m in (re.match(r"(\d+) (\w+)\(", l) for l in sys.stdin)
        if m and m.group(2) != "glGetStringi"]
ranges = []
for c in keep:
    if ranges and ranges[-1][1] == c - 1:
        ranges[-1][1] = c
    else:
        ranges.append([c, c])
print(",".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges))' >"$WORK/calls.txt"
        apitrace trim --calls="$(cat "$WORK/calls.txt")" -o "$out" "$BIG/$src.trace" >/dev/null 2>&1
    else
        mv "$WORK/cut.trace" "$out"
    fi
    local size
    size=$(stat -c %s "$out")
    ((size < MAX_BYTES)) || die "$name: $size bytes, over 1 MiB"
    log "cut $name.trace: $(frames_of "$out") frames, $size bytes"
}
cut love-persistent love 0-2 drop-glGetStringi
cut qt6-qml qt6-qml 0-2
cut mpv-gpu mpv-gpu 0-3

log "done: $(ls "$BIG"/*.trace | wc -l) traces in $BIG, cuts in $CUTS"
