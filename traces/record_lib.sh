# record_lib.sh - what the recording scripts (record.sh, corpus/record*.sh) share.
# Source it after defining `log MESSAGE` and `die MESSAGE`.

# install_debs PACKAGE...: apt-get install those that are not installed yet.
install_debs() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        log "installing: ${missing[*]}"
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
    fi
}

# start_private_xvfb WORK: an Xvfb of our own on a free display, DISPLAY exported;
# on exit the Xvfb is stopped and the work folder WORK removed.
start_private_xvfb() {
    RECORD_WORK=$1
    XVFB_PID=
    trap _stop_private_xvfb EXIT
    local n display_num=
    for n in $(seq 90 199); do
        if [[ ! -e /tmp/.X$n-lock && ! -e /tmp/.X11-unix/X$n ]]; then
            display_num=$n
            break
        fi
    done
    [[ -n $display_num ]] || die "no free X display number"
    Xvfb ":$display_num" -screen 0 1024x768x24 -nolisten tcp >"$RECORD_WORK/xvfb.log" 2>&1 &
    XVFB_PID=$!
    for _ in $(seq 100); do
        [[ -e /tmp/.X11-unix/X$display_num ]] && break
        kill -0 "$XVFB_PID" 2>/dev/null || die "Xvfb failed: $(cat "$RECORD_WORK/xvfb.log")"
        sleep 0.1
    done
    export DISPLAY=":$display_num"
}

_stop_private_xvfb() {
    if [[ -n $XVFB_PID ]]; then
        kill "$XVFB_PID" 2>/dev/null || true
        wait "$XVFB_PID" 2>/dev/null || true
    fi
    rm -rf "$RECORD_WORK"
}

# program_environment WORK: a fresh work folder WORK, a private Xvfb (start_private_xvfb),
# Mesa's llvmpipe, a private empty HOME (Neverball windowed and silent), no tracer
# settings inherited.
program_environment() {
    local work=$1
    rm -rf "$work"
    mkdir -p "$work/home/.neverball" "$work/runtime"
    chmod 700 "$work/runtime"
    start_private_xvfb "$work"
    export LIBGL_ALWAYS_SOFTWARE=1 GALLIUM_DRIVER=llvmpipe
    export HOME=$work/home XDG_RUNTIME_DIR=$work/runtime
    export PATH=$PATH:/usr/games
    export LC_ALL=C.UTF-8 NO_AT_BRIDGE=1 SDL_AUDIODRIVER=dummy
    unset LD_PRELOAD TRACE_FILE
    printf 'fullscreen 0\nwidth 640\nheight 480\nsound_volume 0\nmusic_volume 0\n' \
        >"$HOME/.neverball/neverballrc"
}

# rec_into DIR NAME SECONDS CMD...: trace CMD (desktop GL) into DIR/NAME.trace, stopped with
# SIGINT after SECONDS if still running; its output in $WORK/NAME.log (the caller's log, die
# and WORK)
rec_into() {
    local dir=$1 name=$2 secs=$3
    shift 3
    log "tracing $name: $*"
    rm -f "$dir/$name.trace"
    timeout -s INT "$secs" apitrace trace --api gl -o "$dir/$name.trace" "$@" \
        >"$WORK/$name.log" 2>&1 || true
    [[ -s $dir/$name.trace ]] || die "$name: no trace written: $(tail -n 5 "$WORK/$name.log")"
    log "$name.trace: $(stat -c %s "$dir/$name.trace") bytes"
}
