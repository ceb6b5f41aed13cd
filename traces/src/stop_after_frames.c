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
 * It records nothing itself and makes no GL calls of its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static long frames_done;

static void count_frame(void)
{
    const char *env = getenv("STOP_AFTER_FRAMES");
    long limit = env ? atol(env) : 5;

    if (++frames_done >= limit) {
        fprintf(stderr, "stop_after_frames: %ld frames, exiting\n", frames_done);
        exit(0);
    }
}

void glXSwapBuffers(void *dpy, unsigned long drawable)
{
    static void (*next)(void *, unsigned long);

    if (!next)
        next = (void (*)(void *, unsigned long))dlsym(RTLD_NEXT, "glXSwapBuffers");
    next(dpy, drawable);
    count_frame();
}

unsigned int eglSwapBuffers(void *dpy, void *surface)
{
    static unsigned int (*next)(void *, void *);
    unsigned int ok;

    if (!next)
        next = (unsigned int (*)(void *, void *))dlsym(RTLD_NEXT, "eglSwapBuffers");
    ok = next(dpy, surface);
    count_frame();
    return ok;
}
