/*
 * A model of NVIDIA's EGL driver for retrace's tests: a libglvnd EGL vendor library that
 * wraps Mesa's and departs from it where NVIDIA's driver was measured to (driver 580.159.04
 * on an H200, issue 30), so that CI catches on llvmpipe what would break on NVIDIA.
 *
 * 1. A display belongs to the process that initialised it: eglCreateContext in a forked
 *    child of that process fails with EGL_BAD_ALLOC (threads of the process are fine).
 *    A display the child terminates and initialises again is the child's (not measured).
 * 2. A desktop-GL context's default-framebuffer draw and read buffers are context state,
 *    set at its FIRST make-current (GL 4.6, 17.4.1): GL_BACK on a back-buffered surface
 *    (NVIDIA's pbuffers have only a back buffer), GL_FRONT on a single-buffered one,
 *    GL_NONE when first made current surfacelessly, and from then on what the application
 *    set, whatever surface it is bound to later. Mesa takes them partly from the surface it
 *    binds (a new pbuffer comes with GL_BACK to draw), so there a context first made current
 *    surfacelessly still draws into its pbuffer. The model saves GL_DRAW_BUFFER and
 *    GL_READ_BUFFER of the default framebuffer when the context leaves its surfaces
 *    (eglMakeCurrent, eglReleaseThread) and puts them back after Mesa bound the next ones.
 *    Only the first draw buffer is kept: glDrawBuffers of several on the default
 *    framebuffer is not modelled.
 * 3. A pbuffer has no front buffer: glDrawBuffer(GL_FRONT or GL_FRONT_LEFT) with the
 *    default framebuffer of a pbuffer bound is GL_INVALID_OPERATION (measured: GL_FRONT),
 *    reported by glGetError before Mesa's errors. glDrawBuffers, glReadBuffer and the
 *    direct-state-access forms are passed to Mesa as they are (not measured).
 *
 * The vendor ABI is libglvnd's public interface (include/glvnd/libeglabi.h); the few
 * declarations below follow its layout. libEGL loads this library (named by a JSON file
 * in __EGL_VENDOR_LIBRARY_FILENAMES) and calls __egl_Main, which loads Mesa's vendor
 * library (WRAPPED, given when compiling), lets it fill in the tables, and puts the
 * model's functions in front of Mesa's in getProcAddress, through which libEGL and
 * libGLdispatch find every EGL and GL function of a vendor.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef WRAPPED
#error "compile with -DWRAPPED='\"libEGL_mesa.so.0\"' (Mesa's glvnd vendor library)"
#endif

/* --- EGL and GL types and values (Khronos headers) ----------------------------------------- */

typedef void *EGLDisplay, *EGLConfig, *EGLContext, *EGLSurface;
typedef int32_t EGLint;
typedef unsigned int EGLBoolean, EGLenum, GLenum, GLuint;
typedef int GLint;

#define EGL_FALSE 0
#define EGL_TRUE 1
#define EGL_BAD_ALLOC 0x3003
#define EGL_RENDER_BUFFER 0x3086
#define EGL_SINGLE_BUFFER 0x3085
#define EGL_OPENGL_API 0x30A2

#define GL_NO_ERROR 0
#define GL_NONE 0
#define GL_FRONT_LEFT 0x0400
#define GL_FRONT 0x0404
#define GL_BACK 0x0405
#define GL_INVALID_OPERATION 0x0502
#define GL_DRAW_BUFFER 0x0C01
#define GL_READ_BUFFER 0x0C02
#define GL_READ_FRAMEBUFFER 0x8CA8
#define GL_DRAW_FRAMEBUFFER 0x8CA9
#define GL_DRAW_FRAMEBUFFER_BINDING 0x8CA6
#define GL_READ_FRAMEBUFFER_BINDING 0x8CAA

/* --- libglvnd's vendor ABI: what libEGL exports to a vendor, and what it imports ----------- */

struct exports {
    void (*threadInit)(void);
    EGLenum (*getCurrentApi)(void);
    void *getCurrentVendor, *getCurrentContext, *getCurrentDisplay, *getCurrentSurface;
    void *fetchDispatchEntry;
    void (*setEGLError)(EGLint error);
    /* ... and more the model does not use */
};

struct imports {
    void *getPlatformDisplay, *getSupportsAPI, *getVendorString;
    void *(*getProcAddress)(const char *name);
    void *getDispatchAddress, *setDispatchIndex;
    void *isPatchSupported, *initiatePatch, *releasePatch; /* entry-point patching */
    void *patchThreadAttach, *findNativeDisplayPlatform;
};

typedef EGLBoolean (*egl_main)(uint32_t version, const struct exports *exports, void *vendor,
                               struct imports *imports);

static const struct exports *glvnd;
static void *(*mesa_proc)(const char *name);

/* Mesa's functions the model calls, found by name when loaded. */
static struct {
    EGLBoolean (*eglInitialize)(EGLDisplay, EGLint *, EGLint *);
    EGLBoolean (*eglTerminate)(EGLDisplay);
    EGLContext (*eglCreateContext)(EGLDisplay, EGLConfig, EGLContext, const EGLint *);
    EGLBoolean (*eglMakeCurrent)(EGLDisplay, EGLSurface, EGLSurface, EGLContext);
    EGLBoolean (*eglReleaseThread)(void);
    EGLBoolean (*eglQuerySurface)(EGLDisplay, EGLSurface, EGLint, EGLint *);
    EGLSurface (*eglCreatePbufferSurface)(EGLDisplay, EGLConfig, const EGLint *);
    EGLBoolean (*eglDestroySurface)(EGLDisplay, EGLSurface);
    void (*glGetIntegerv)(GLenum, GLint *);
    void (*glBindFramebuffer)(GLenum, GLuint);
    void (*glDrawBuffer)(GLenum);
    void (*glReadBuffer)(GLenum);
    GLenum (*glGetError)(void);
} mesa;

static int resolve_mesa(void)
{
#define FIND(name) (*(void **)&mesa.name = mesa_proc(#name)) != NULL
    return FIND(eglInitialize) && FIND(eglTerminate) && FIND(eglCreateContext) &&
           FIND(eglMakeCurrent) && FIND(eglReleaseThread) && FIND(eglQuerySurface) &&
           FIND(eglCreatePbufferSurface) && FIND(eglDestroySurface) && FIND(glGetIntegerv) &&
           FIND(glBindFramebuffer) && FIND(glDrawBuffer) && FIND(glReadBuffer) &&
           FIND(glGetError);
#undef FIND
}

/* --- what the model remembers --------------------------------------------------------------- */

struct display {
    EGLDisplay handle;
    pid_t owner; /* the process that initialised it; 0 while not initialised */
    struct display *next;
};

struct context {
    EGLContext handle;
    int desktop;          /* created for EGL_OPENGL_API */
    int bound;            /* made current once: its draw/read buffers are set */
    GLenum draw, read;    /* its default framebuffer's, while not bound to surfaces */
    GLenum error;         /* the model's GL error, reported before Mesa's */
    struct context *next; /* records are kept (handles come back after destruction) */
};

struct surface {
    EGLSurface handle;
    struct surface *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct display *displays;
static struct context *contexts;
static struct surface *pbuffers;

/* What this thread has current, as the model last bound it. */
static __thread struct context *current;
static __thread EGLSurface current_draw, current_read;

static struct display *display_record(EGLDisplay handle)
{
    struct display *d;
    for (d = displays; d != NULL && d->handle != handle; d = d->next) {
    }
    if (d == NULL && (d = calloc(1, sizeof *d)) != NULL) {
        d->handle = handle;
        d->next = displays;
        displays = d;
    }
    return d;
}

static struct context *context_record(EGLContext handle, int create)
{
    struct context *c;
    pthread_mutex_lock(&lock);
    for (c = contexts; c != NULL && c->handle != handle; c = c->next) {
    }
    if (c == NULL && create && (c = calloc(1, sizeof *c)) != NULL) {
        c->handle = handle;
        c->next = contexts;
        contexts = c;
    }
    pthread_mutex_unlock(&lock);
    return c;
}

static int is_pbuffer(EGLSurface handle)
{
    struct surface *s;
    pthread_mutex_lock(&lock);
    for (s = pbuffers; s != NULL && s->handle != handle; s = s->next) {
    }
    pthread_mutex_unlock(&lock);
    return s != NULL;
}

/* --- 1. a display is its initialising process's -------------------------------------------- */

static EGLBoolean model_eglInitialize(EGLDisplay dpy, EGLint *major, EGLint *minor)
{
    EGLBoolean ok = mesa.eglInitialize(dpy, major, minor);
    if (ok) {
        pthread_mutex_lock(&lock);
        struct display *d = display_record(dpy);
        if (d != NULL && d->owner == 0)
            d->owner = getpid();
        pthread_mutex_unlock(&lock);
    }
    return ok;
}

static EGLBoolean model_eglTerminate(EGLDisplay dpy)
{
    EGLBoolean ok = mesa.eglTerminate(dpy);
    if (ok) {
        pthread_mutex_lock(&lock);
        struct display *d = display_record(dpy);
        if (d != NULL)
            d->owner = 0;
        pthread_mutex_unlock(&lock);
    }
    return ok;
}

static EGLContext model_eglCreateContext(EGLDisplay dpy, EGLConfig config, EGLContext share,
                                         const EGLint *attribs)
{
    pthread_mutex_lock(&lock);
    struct display *d = display_record(dpy);
    pid_t owner = d != NULL ? d->owner : 0;
    pthread_mutex_unlock(&lock);
    if (owner != 0 && owner != getpid()) {
        glvnd->setEGLError(EGL_BAD_ALLOC);
        return NULL;
    }
    EGLContext made = mesa.eglCreateContext(dpy, config, share, attribs);
    struct context *c = made != NULL ? context_record(made, 1) : NULL;
    if (c != NULL) {
        c->desktop = glvnd->getCurrentApi() == EGL_OPENGL_API;
        c->bound = 0;
        c->error = GL_NO_ERROR;
    }
    return made;
}

/* --- 2. draw and read buffers are the context's, set at its first make-current ------------- */

/* Runs `use` on the default framebuffer: binds it for drawing and reading meanwhile. */
static void on_default_framebuffer(void (*use)(struct context *, EGLSurface, EGLSurface),
                                   struct context *c, EGLSurface draw, EGLSurface read)
{
    GLint draw_fbo = 0, read_fbo = 0;
    mesa.glGetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &draw_fbo);
    mesa.glGetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &read_fbo);
    if (draw_fbo != 0)
        mesa.glBindFramebuffer(GL_DRAW_FRAMEBUFFER, 0);
    if (read_fbo != 0)
        mesa.glBindFramebuffer(GL_READ_FRAMEBUFFER, 0);
    use(c, draw, read);
    if (draw_fbo != 0)
        mesa.glBindFramebuffer(GL_DRAW_FRAMEBUFFER, (GLuint)draw_fbo);
    if (read_fbo != 0)
        mesa.glBindFramebuffer(GL_READ_FRAMEBUFFER, (GLuint)read_fbo);
}

static void save(struct context *c, EGLSurface draw, EGLSurface read)
{
    GLint value = 0;
    if (draw != NULL) {
        mesa.glGetIntegerv(GL_DRAW_BUFFER, &value);
        c->draw = (GLenum)value;
    }
    if (read != NULL) {
        mesa.glGetIntegerv(GL_READ_BUFFER, &value);
        c->read = (GLenum)value;
    }
}

static void restore(struct context *c, EGLSurface draw, EGLSurface read)
{
    GLint value = 0;
    if (draw != NULL) {
        mesa.glGetIntegerv(GL_DRAW_BUFFER, &value);
        if ((GLenum)value != c->draw)
            mesa.glDrawBuffer(c->draw);
    }
    if (read != NULL) {
        mesa.glGetIntegerv(GL_READ_BUFFER, &value);
        if ((GLenum)value != c->read)
            mesa.glReadBuffer(c->read);
    }
}

/* The buffer a surface starts with: its front one if it has no back one. */
static GLenum initial_buffer(EGLDisplay dpy, EGLSurface surface)
{
    EGLint rendered = 0;
    if (surface == NULL)
        return GL_NONE;
    mesa.eglQuerySurface(dpy, surface, EGL_RENDER_BUFFER, &rendered);
    return rendered == EGL_SINGLE_BUFFER ? GL_FRONT : GL_BACK;
}

/* Before this thread's context is unbound: what its surfaces' buffers were set to. */
static void leave(void)
{
    if (current != NULL && current->desktop && (current_draw != NULL || current_read != NULL))
        on_default_framebuffer(save, current, current_draw, current_read);
}

static EGLBoolean model_eglMakeCurrent(EGLDisplay dpy, EGLSurface draw, EGLSurface read,
                                       EGLContext ctx)
{
    int same = current != NULL && current->handle == ctx && current_draw == draw &&
               current_read == read;
    if (same)
        return mesa.eglMakeCurrent(dpy, draw, read, ctx);
    leave();
    EGLBoolean ok = mesa.eglMakeCurrent(dpy, draw, read, ctx);
    if (!ok)
        return ok;
    current = ctx != NULL ? context_record(ctx, 0) : NULL;
    current_draw = draw;
    current_read = read;
    struct context *c = current;
    if (c == NULL || !c->desktop)
        return ok;
    if (!c->bound) {
        c->bound = 1;
        c->draw = initial_buffer(dpy, draw);
        c->read = initial_buffer(dpy, read);
    }
    if (draw != NULL || read != NULL)
        on_default_framebuffer(restore, c, draw, read);
    return ok;
}

/* libEGL releases the thread's context through the vendor's eglReleaseThread, not
 * eglMakeCurrent. */
static EGLBoolean model_eglReleaseThread(void)
{
    leave();
    EGLBoolean ok = mesa.eglReleaseThread();
    if (ok) {
        current = NULL;
        current_draw = current_read = NULL;
    }
    return ok;
}

/* --- 3. a pbuffer has no front buffer ------------------------------------------------------ */

static EGLSurface model_eglCreatePbufferSurface(EGLDisplay dpy, EGLConfig config,
                                                const EGLint *attribs)
{
    EGLSurface made = mesa.eglCreatePbufferSurface(dpy, config, attribs);
    struct surface *s = made != NULL ? calloc(1, sizeof *s) : NULL;
    if (s != NULL) {
        s->handle = made;
        pthread_mutex_lock(&lock);
        s->next = pbuffers;
        pbuffers = s;
        pthread_mutex_unlock(&lock);
    }
    return made;
}

static EGLBoolean model_eglDestroySurface(EGLDisplay dpy, EGLSurface surface)
{
    EGLBoolean ok = mesa.eglDestroySurface(dpy, surface);
    if (ok) {
        pthread_mutex_lock(&lock);
        for (struct surface **s = &pbuffers; *s != NULL; s = &(*s)->next) {
            if ((*s)->handle == surface) {
                struct surface *gone = *s;
                *s = gone->next;
                free(gone);
                break;
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return ok;
}

static void model_glDrawBuffer(GLenum mode)
{
    GLint draw_fbo = 0;
    if ((mode == GL_FRONT || mode == GL_FRONT_LEFT) && current != NULL && current_draw != NULL) {
        mesa.glGetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &draw_fbo);
        if (draw_fbo == 0 && is_pbuffer(current_draw)) {
            if (current->error == GL_NO_ERROR)
                current->error = GL_INVALID_OPERATION;
            return;
        }
    }
    mesa.glDrawBuffer(mode);
}

static GLenum model_glGetError(void)
{
    if (current != NULL && current->error != GL_NO_ERROR) {
        GLenum error = current->error;
        current->error = GL_NO_ERROR;
        return error;
    }
    return mesa.glGetError();
}

/* --- the vendor library's entry --------------------------------------------------------- */

static const struct {
    const char *name;
    void *function;
} model_functions[] = {
    {"eglInitialize", (void *)model_eglInitialize},
    {"eglTerminate", (void *)model_eglTerminate},
    {"eglCreateContext", (void *)model_eglCreateContext},
    {"eglMakeCurrent", (void *)model_eglMakeCurrent},
    {"eglReleaseThread", (void *)model_eglReleaseThread},
    {"eglCreatePbufferSurface", (void *)model_eglCreatePbufferSurface},
    {"eglDestroySurface", (void *)model_eglDestroySurface},
    {"glDrawBuffer", (void *)model_glDrawBuffer},
    {"glGetError", (void *)model_glGetError},
};

static void *model_proc(const char *name)
{
    for (size_t i = 0; i < sizeof model_functions / sizeof model_functions[0]; i++) {
        if (strcmp(name, model_functions[i].name) == 0)
            return model_functions[i].function;
    }
    return mesa_proc(name);
}

__attribute__((visibility("default"))) EGLBoolean
__egl_Main(uint32_t version, const struct exports *exports, void *vendor, struct imports *imports)
{
    void *mesa = dlopen(WRAPPED, RTLD_NOW | RTLD_LOCAL);
    egl_main mesa_main = mesa != NULL ? (egl_main)dlsym(mesa, "__egl_Main") : NULL;
    if (mesa_main == NULL || !mesa_main(version, exports, vendor, imports))
        return EGL_FALSE;
    glvnd = exports;
    mesa_proc = imports->getProcAddress;
    if (!resolve_mesa())
        return EGL_FALSE;
    imports->getProcAddress = model_proc;
    /* Entry points patched by the vendor would bypass the model's GL functions. */
    imports->isPatchSupported = NULL;
    imports->initiatePatch = NULL;
    imports->releasePatch = NULL;
    return EGL_TRUE;
}
