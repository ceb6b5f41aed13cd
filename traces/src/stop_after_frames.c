/*
 * stop_after_frames.c - LD_PRELOAD helper used by record.sh.
 *
 * glxgears, es2gears_x11 and es2tri have no "render N frames" option: they
 * loop until killed.  Killing them leaves the last call of the trace without
 * its "leave" record.  This helper wraps glXSwapBuffers and eglSwapBuffers,
 * forwards each call to the next definition (apitrace's wrapper, which must
 * come AFTER this library in LD_PRELOAD so the swap is fully recorded), and
 * calls exit(0) once STOP_AFTER_FRAMES swaps (default 5) have returned.
 * exit() runs apitrace's destructors, which close the trace cleanly.
 *
 * With STOP_WITH_SIGNAL=1 it instead raises SIGINT *inside* the last swap,
 * before forwarding it.  For that the library must come AFTER apitrace's
 * wrapper in LD_PRELOAD (which is what `LD_PRELOAD=this.so apitrace trace`
 * gives), so that the wrapper has already written the swap's "enter" record;
 * apitrace's signal handler flushes the trace and the process dies, leaving a
 * trace whose last call is incomplete (no "leave" record), exactly as when a
 * user presses Ctrl-C, but after a fixed number of frames.
 *
 * It records nothing itself and makes no GL calls of its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static long frames_done;

static long frame_limit(void)
{
    const char *env = getenv("STOP_AFTER_FRAMES");
    return env ? atol(env) : 5;
}

static int with_signal(void)
{
    const char *env = getenv("STOP_WITH_SIGNAL");
    return env && atoi(env) != 0;
}

/* Called before forwarding a swap. */
static void before_swap(void)
{
    if (with_signal() && frames_done + 1 >= frame_limit()) {
        fprintf(stderr, "stop_after_frames: raising SIGINT inside swap %ld\n",
                frames_done + 1);
        raise(SIGINT);
    }
}

/* Called after a swap has returned. */
static void after_swap(void)
{
    if (++frames_done >= frame_limit()) {
        fprintf(stderr, "stop_after_frames: %ld frames, exiting\n", frames_done);
        exit(0);
    }
}

void glXSwapBuffers(void *dpy, unsigned long drawable)
{
    static void (*next)(void *, unsigned long);

    if (!next)
        next = (void (*)(void *, unsigned long))dlsym(RTLD_NEXT, "glXSwapBuffers");
    before_swap();
    next(dpy, drawable);
    after_swap();
}

unsigned int eglSwapBuffers(void *dpy, void *surface)
{
    static unsigned int (*next)(void *, void *);
    unsigned int ok;

    if (!next)
        next = (unsigned int (*)(void *, void *))dlsym(RTLD_NEXT, "eglSwapBuffers");
    before_swap();
    ok = next(dpy, surface);
    after_swap();
    return ok;
}
