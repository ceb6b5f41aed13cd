# record_lib.sh - what the recording scripts (record.sh, corpus/record.sh) share.
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
