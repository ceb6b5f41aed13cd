#!/usr/bin/env bash
# record.sh - re-record every apitrace trace in this folder from scratch.
#
# What it does:
#   1. Installs what is missing (Debian 12 packages: apitrace,
#      apitrace-tracers, xvfb, mesa-utils, glmark2-x11, glmark2-es2-x11,
#      piglit, gcc, libegl-dev, libgles-dev, libgl-dev; Python: cramjam, zstandard).
#   2. Starts its own Xvfb on a free display (stopped again on exit) and
#      forces Mesa's llvmpipe software driver, so the traces do not depend on
#      the machine's GPU.
#   3. Compiles the C files in src/: egl_two_threads (our own headless
#      EGL/GLES2 program), persistent_map (our own GL 4.5 core program),
#      egl_image (our own EGLImage sharing program), readbacks (our own
#      readbacks under pixel-store state)
#      and stop_after_frames.so (an LD_PRELOAD helper that
#      ends glxgears/es2gears_x11/es2tri after a fixed number of frames).
#   4. Traces each program with apitrace 11.1 (Snappy container), checks the
#      result (`apitrace info`, no incomplete last call unless intended, size
#      under 1 MiB) and replays it with glretrace/eglretrace -b.
#   5. Writes container variants of es2tri.trace: gzip and Brotli with
#      `apitrace repack`, Zstandard (seekable and not) with make_variants.py.
#   6. Writes manifest.tsv (calls, frames, threads... per trace) and the
#      reference dumps in expected/.
#
# The traces are committed; nothing in the test suite runs this script.
# Usage: traces/record.sh            (needs root only to install packages)
#        OUT=/some/dir traces/record.sh   to write somewhere else.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-$HERE}
mkdir -p "$OUT" "$OUT/expected"

log() { printf 'record.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
. "$HERE/record_lib.sh"

# --------------------------------------------------------------------------
# 1. Dependencies
DEBS=(apitrace apitrace-tracers xvfb mesa-utils glmark2-x11 glmark2-es2-x11
      piglit gcc libc6-dev libegl-dev libgles-dev libgl-dev python3)
install_debs "${DEBS[@]}"
if ! python3 -c 'import cramjam, zstandard' 2>/dev/null; then
    log "installing Python packages cramjam and zstandard"
    python3 -m pip install cramjam zstandard
fi

PIGLIT_BIN=$(dirname "$(dpkg -L piglit | grep '/piglit/bin/fbo-blit$' | sed -n 1p)")
WRAPPERS=$(dirname "$(dpkg -L apitrace-tracers | grep '/glxtrace\.so$' | sed -n 1p)")
[[ -x $PIGLIT_BIN/fbo-blit && -f $WRAPPERS/egltrace.so ]] \
    || die "piglit tests or apitrace wrappers not found"

# --------------------------------------------------------------------------
# 2. Environment: private Xvfb, software rendering, fixed locale
# A fixed work folder: apitrace records the program's path (process.name).
WORK=/tmp/retrace-record-traces
rm -rf "$WORK"
mkdir -p "$WORK"
start_private_xvfb "$WORK"
export LIBGL_ALWAYS_SOFTWARE=1 GALLIUM_DRIVER=llvmpipe
export PIGLIT_PLATFORM=glx
export LC_ALL=C
unset LD_PRELOAD TRACE_FILE
log "Xvfb on $DISPLAY, work dir $WORK"

# --------------------------------------------------------------------------
# 3. Build our helpers
gcc -std=c99 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Werror \
    -o "$WORK/egl_two_threads" "$HERE/src/egl_two_threads.c" -lEGL -lGLESv2 -lpthread
gcc -std=c99 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Werror \
    -o "$WORK/persistent_map" "$HERE/src/persistent_map.c" -lEGL -lGL
gcc -std=c99 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Werror \
    -o "$WORK/egl_image" "$HERE/src/egl_image.c" -lEGL -lGLESv2
gcc -std=c99 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Werror \
    -o "$WORK/readbacks" "$HERE/src/readbacks.c" -lEGL -lGL
gcc -shared -fPIC -O2 -Wall -Wextra -Werror \
    -o "$WORK/stop_after_frames.so" "$HERE/src/stop_after_frames.c" -ldl

# --------------------------------------------------------------------------
# 4. Tracing
MAX_BYTES=$((1024 * 1024))

# check NAME API [incomplete]: verify $WORK/NAME.trace, replay it, move it to $OUT.
# With REFERENCE_CRASHES=1 the reference replay must die of SIGSEGV instead.
check() {
    local name=$1 api=$2 expect_incomplete=${3:-}
    local f="$WORK/$name.trace"
    [[ -s $f ]] || die "$name: no trace written"
    apitrace info "$f" >"$WORK/$name.info" || die "$name: apitrace info failed"
    local last
    last=$(apitrace dump --color=never --multiline=false "$f" | grep -E '^[0-9]+ ' | tail -n 1)
    if [[ -n $expect_incomplete ]]; then
        [[ $last == *'// incomplete' ]] || die "$name: last call should be incomplete: $last"
    else
        [[ $last != *'// incomplete' ]] || die "$name: last call is incomplete: $last"
    fi
    local size
    size=$(stat -c %s "$f")
    ((size < MAX_BYTES)) || die "$name: $size bytes, over 1 MiB"
    local replay=(glretrace -b "$f")
    if [[ $api == egl ]]; then
        replay=(eglretrace -b "$f")
        [[ $name == egl-two-threads ]] && replay=(env WAFFLE_PLATFORM=surfaceless_egl eglretrace -b "$f")
    fi
    if [[ -n ${REFERENCE_CRASHES:-} ]]; then
        local status=0
        "${replay[@]}" >"$WORK/$name.replay" 2>&1 || status=$?
        ((status == 139)) || die "$name: the reference replay should crash (SIGSEGV), status $status"
        mv "$f" "$OUT/$name.trace"
        log "$name.trace: $size bytes, the reference replay crashes (SIGSEGV)"
        return
    fi
    "${replay[@]}" >"$WORK/$name.replay" 2>&1 || die "$name: replay failed: $(tail -n 3 "$WORK/$name.replay")"
    grep -q '^Rendered ' "$WORK/$name.replay" || die "$name: replay did not finish"
    mv "$f" "$OUT/$name.trace"
    log "$name.trace: $size bytes, $(grep '^Rendered' "$WORK/$name.replay")"
}

# trace NAME API CMD...: plain `apitrace trace`; the program must exit by itself.
trace() {
    local name=$1 api=$2
    shift 2
    log "tracing $name: $*"
    apitrace trace --api "$api" -o "$WORK/$name.trace" "$@" >"$WORK/$name.log" 2>&1 \
        || die "$name: program failed: $(tail -n 5 "$WORK/$name.log")"
    check "$name" "$api"
}

# trace_piglit NAME TEST ARGS...: as trace, and the test must report "pass".
trace_piglit() {
    local name=$1 test=$2
    shift 2
    trace "$name" gl "$PIGLIT_BIN/$test" "$@"
    grep -q '"result": "pass"' "$WORK/$name.log" || die "$name: piglit test did not pass"
}

# trace_frames NAME API FRAMES CMD...: for programs that never exit.  Our
# helper comes BEFORE apitrace's wrapper in LD_PRELOAD (so `apitrace trace`,
# which puts its wrapper first, cannot be used): each swap is fully recorded,
# then the helper calls exit(0) after FRAMES swaps.
trace_frames() {
    local name=$1 api=$2 frames=$3
    shift 3
    local wrapper=$WRAPPERS/glxtrace.so
    [[ $api == egl ]] && wrapper=$WRAPPERS/egltrace.so
    log "tracing $name ($frames frames): $*"
    STOP_AFTER_FRAMES=$frames LD_PRELOAD="$WORK/stop_after_frames.so:$wrapper" \
        TRACE_FILE="$WORK/$name.trace" "$@" >"$WORK/$name.log" 2>&1 \
        || die "$name: program failed: $(tail -n 5 "$WORK/$name.log")"
    check "$name" "$api"
}

# Real programs that loop forever: stop after a fixed number of frames.
trace_frames glxgears gl 5 glxgears
trace_frames es2gears egl 5 es2gears_x11
trace_frames es2tri egl 1 es2tri

# The same glxgears interrupted by SIGINT inside its 3rd glXSwapBuffers: the
# helper comes AFTER the wrapper here, so the swap's enter record is already
# written; apitrace flushes on the signal and the process dies (status 130).
log "tracing glxgears-interrupted (SIGINT inside swap 3)"
set +e
STOP_AFTER_FRAMES=3 STOP_WITH_SIGNAL=1 LD_PRELOAD="$WORK/stop_after_frames.so" \
    apitrace trace --api gl -o "$WORK/glxgears-interrupted.trace" glxgears \
    >"$WORK/glxgears-interrupted.log" 2>&1
status=$?
set -e
((status == 130)) || die "glxgears-interrupted: exit status $status, expected 130"
check glxgears-interrupted gl incomplete

# Our own program: EGL surfaceless, two threads, non-ASCII strings.
trace egl-two-threads egl "$WORK/egl_two_threads"
# Our own GL 4.5 core program: persistently mapped buffers, as engines stream data.
trace persistent-map egl "$WORK/persistent_map"
# Our own GLES2 program: a texture shared through an EGLImage.
trace egl-image egl "$WORK/egl_image"
# Our own GL 4.5 compatibility program: readbacks under pixel-store state (eglretrace dies
# of SIGSEGV on the tile readback), of textures of every kind, and the same frames without.
REFERENCE_CRASHES=1 trace readback-pixels egl "$WORK/readbacks" pixels
trace readback-textures egl "$WORK/readbacks" textures
trace readback-plain egl "$WORK/readbacks" plain

# glmark2 (GLX) and glmark2-es2 (EGL on X11): 5 frames of one scene each.
GM=(-s 256x256)
trace glmark2-build-clientarrays gl glmark2 "${GM[@]}" -b build:model=cube:use-vbo=false:nframes=5
trace glmark2-texture-mipmap gl glmark2 "${GM[@]}" -b texture:texture=effect-2d:texture-filter=mipmap:nframes=5
trace glmark2-desktop-fbo gl glmark2 "${GM[@]}" -b desktop:windows=2:nframes=5
trace glmark2-buffer-map gl glmark2 "${GM[@]}" -b buffer:columns=20:rows=10:update-method=map:nframes=5
trace glmark2-es2-pulsar egl glmark2-es2 "${GM[@]}" -b pulsar:nframes=5
trace glmark2-es2-effect2d egl glmark2-es2 "${GM[@]}" -b effect2d:nframes=5

# piglit (GLX).  -auto: no interaction; -fbo: render into an FBO.
trace_piglit piglit-compute-indirect arb_compute_shader-indirect-compute -auto -fbo
trace_piglit piglit-sync-api sync_api -auto -fbo
trace_piglit piglit-instanced-arrays arb_instanced_arrays-drawarrays -auto -fbo
trace_piglit piglit-xfb-draw-auto arb_transform_feedback2-draw-auto -auto -fbo
trace_piglit piglit-fbo-blit fbo-blit -auto -fbo
trace_piglit piglit-map-buffer-range map_buffer_range_test -auto -fbo
trace_piglit piglit-occlusion-query occlusion_query -auto -fbo
trace_piglit piglit-ubo-rendering arb_uniform_buffer_object-rendering -auto -fbo
trace_piglit piglit-client-arrays draw-vertices -auto -fbo
trace_piglit piglit-dlist-beginend gl-1.0-dlist-beginend -auto -fbo
trace_piglit piglit-glx-multithread glx-multithread -auto

# --------------------------------------------------------------------------
# 5. Container variants of es2tri.trace
apitrace repack --zlib "$OUT/es2tri.trace" "$OUT/es2tri.gzip.trace"
apitrace repack --brotli "$OUT/es2tri.trace" "$OUT/es2tri.brotli.trace"
python3 "$HERE/make_variants.py" --input "$OUT/es2tri.trace" --output-prefix "$OUT/es2tri"
reference_dump=$(apitrace dump --color=never "$OUT/es2tri.trace" | md5sum)
for v in gzip brotli; do
    [[ $(apitrace dump --color=never "$OUT/es2tri.$v.trace" | md5sum) == "$reference_dump" ]] \
        || die "es2tri.$v.trace does not dump like es2tri.trace"
done

# --------------------------------------------------------------------------
# 6. manifest.tsv and reference dumps
{
    printf 'file\tapi\tcontainer\tcalls\tcalls_in_default_dump\tframes\tthreads\tfake_calls\tincomplete_calls\traw_bytes\tbytes\n'
    for f in "$OUT"/*.trace; do
        name=$(basename "$f")
        case $name in es2tri.*.trace) continue ;; esac
        apitrace dump --color=never -v --thread-ids --multiline=false "$f" \
            | grep -E '^[0-9]+ @[0-9]+ ' >"$WORK/all.txt" || true
        info=$(apitrace info "$f")
        field() { sed -n "s/^ *\"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" <<<"$info"; }
        api=GL
        [[ $(field API) == *EGL* ]] && api=EGL
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$name" "$api" "$(field ContainerType)" \
            "$(wc -l <"$WORK/all.txt")" \
            "$(apitrace dump --color=never --multiline=false "$f" | grep -cE '^[0-9]+ ')" \
            "$(field FramesCount)" \
            "$(awk '{print $2}' "$WORK/all.txt" | sort -u | wc -l)" \
            "$(grep -c '// fake$' "$WORK/all.txt" || true)" \
            "$(grep -c '// incomplete$' "$WORK/all.txt" || true)" \
            "$(field ActualDataSize)" "$(stat -c %s "$f")"
    done
} >"$OUT/manifest.tsv"

# expected/NAME.dump: `apitrace dump` with default options;
# expected/NAME.verbose-threads.dump: with -v (verbose calls too) and thread ids.
for name in es2tri egl-two-threads glxgears-interrupted piglit-glx-multithread; do
    apitrace dump --color=never "$OUT/$name.trace" >"$OUT/expected/$name.dump"
done
for name in es2tri egl-two-threads piglit-glx-multithread; do
    apitrace dump --color=never -v --thread-ids "$OUT/$name.trace" >"$OUT/expected/$name.verbose-threads.dump"
done

total=$(du -cb "$OUT"/*.trace | tail -n 1 | cut -f1)
log "done: $(ls "$OUT"/*.trace | wc -l) trace files, $total bytes in all"
