/*
 * egl_two_threads.c - a small headless EGL / OpenGL ES 2 program, written to
 * be traced by `apitrace trace --api egl` (see ../record.sh).
 *
 * What the trace it produces contains:
 *   - EGL on Mesa's surfaceless platform (eglGetPlatformDisplay with
 *     EGL_PLATFORM_SURFACELESS_MESA), one pbuffer surface per thread;
 *   - GL calls from TWO threads, each with its own context (the worker's
 *     context shares objects with the main one).  The two threads take turns
 *     frame by frame (a mutex and a condition variable), so the call order is
 *     the same on every run;
 *   - NFRAMES frames per thread, each ended by eglSwapBuffers on its pbuffer;
 *   - strings with non-ASCII UTF-8 bytes, tabs and newlines: the shader
 *     sources (glShaderSource), an object label (glObjectLabelKHR) and debug
 *     messages (glDebugMessageInsertKHR);
 *   - one deliberate overlap between the threads: the main thread blocks for
 *     WAIT_MS in eglClientWaitSyncKHR on an EGL_KHR_reusable_sync object that
 *     nobody signals, and while that call is inside the driver the worker
 *     makes its last calls (it starts SLEEP_MS after the wait began).  In
 *     the trace the wait's enter record is followed by the worker's complete
 *     calls and only then by the wait's leave record (EGL_TIMEOUT_EXPIRED).
 *     The margins are wide, so the order is the same on every run.  The main
 *     thread then signals the sync itself (eglSignalSyncKHR) and waits again.
 *   - vertex data from a buffer object (main thread) and from a client-side
 *     array in user memory (worker thread).
 */
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES2/gl2.h>
#include <GLES2/gl2ext.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NFRAMES 3
#define WIDTH 64
#define HEIGHT 64
#define SLEEP_MS 50   /* worker: delay before its last calls */
#define WAIT_MS 1000  /* main: eglClientWaitSyncKHR timeout */

static EGLDisplay dpy;
static EGLConfig config;
static EGLContext main_ctx, worker_ctx;
static EGLSurface main_surf, worker_surf;
static EGLSyncKHR done_sync;

static PFNEGLCREATESYNCKHRPROC p_eglCreateSyncKHR;
static PFNEGLCLIENTWAITSYNCKHRPROC p_eglClientWaitSyncKHR;
static PFNEGLSIGNALSYNCKHRPROC p_eglSignalSyncKHR;
static PFNEGLDESTROYSYNCKHRPROC p_eglDestroySyncKHR;
static PFNGLDEBUGMESSAGEINSERTKHRPROC p_glDebugMessageInsertKHR;
static PFNGLOBJECTLABELKHRPROC p_glObjectLabelKHR;

/* Turn-taking: thread `turn` (0 = main, 1 = worker) may render a frame. */
static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond = PTHREAD_COND_INITIALIZER;
static int turn;

static void wait_turn(int me)
{
    pthread_mutex_lock(&turn_lock);
    while (turn != me)
        pthread_cond_wait(&turn_cond, &turn_lock);
    pthread_mutex_unlock(&turn_lock);
}

static void give_turn(int other)
{
    pthread_mutex_lock(&turn_lock);
    turn = other;
    pthread_cond_broadcast(&turn_cond);
    pthread_mutex_unlock(&turn_lock);
}

static void die(const char *what)
{
    fprintf(stderr, "egl_two_threads: %s failed (EGL error 0x%x, GL error 0x%x)\n",
            what, eglGetError(), glGetError());
    exit(1);
}

/* The comments are part of the recorded strings on purpose: UTF-8 "é",
 * "ü" and "→", tab characters and newlines. */
static const char *vs_source =
    "// Sommet : vérifie les chaînes non-ASCII → é ü\n"
    "attribute vec2 a_pos;\n"
    "uniform float u_angle;\n"
    "void main() {\n"
    "\tfloat c = cos(u_angle), s = sin(u_angle);\n"
    "\tgl_Position = vec4(c * a_pos.x - s * a_pos.y,\n"
    "\t                   s * a_pos.x + c * a_pos.y, 0.0, 1.0);\n"
    "}\n";

static const char *fs_source =
    "precision mediump float;\t// fragment shader, café\n"
    "uniform vec4 u_color;\n"
    "void main() {\n"
    "\tgl_FragColor = u_color;\n"
    "}\n";

static const GLfloat triangle[] = {
    0.0f, 0.8f,
    -0.7f, -0.6f,
    0.7f, -0.6f,
};

static GLuint shared_program; /* created by main, used by both contexts */

static GLuint compile(GLenum type, const char *src)
{
    GLuint shader = glCreateShader(type);
    GLint ok = 0;

    glShaderSource(shader, 1, &src, NULL);
    glCompileShader(shader);
    glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
    if (!ok)
        die("glCompileShader");
    return shader;
}

static void build_program(void)
{
    GLuint vs = compile(GL_VERTEX_SHADER, vs_source);
    GLuint fs = compile(GL_FRAGMENT_SHADER, fs_source);
    GLint ok = 0;

    shared_program = glCreateProgram();
    glAttachShader(shared_program, vs);
    glAttachShader(shared_program, fs);
    glBindAttribLocation(shared_program, 0, "a_pos");
    glLinkProgram(shared_program);
    glGetProgramiv(shared_program, GL_LINK_STATUS, &ok);
    if (!ok)
        die("glLinkProgram");
    glDeleteShader(vs);
    glDeleteShader(fs);
    if (p_glObjectLabelKHR)
        p_glObjectLabelKHR(GL_PROGRAM_KHR, shared_program, -1,
                           "programme partagé\n\t(two contexts)");
}

static void debug_marker(const char *text)
{
    if (p_glDebugMessageInsertKHR)
        p_glDebugMessageInsertKHR(GL_DEBUG_SOURCE_APPLICATION_KHR,
                                  GL_DEBUG_TYPE_MARKER_KHR, 1,
                                  GL_DEBUG_SEVERITY_NOTIFICATION_KHR, -1, text);
}

static void draw_frame(int frame, const GLfloat color[4])
{
    glViewport(0, 0, WIDTH, HEIGHT);
    glClearColor(0.1f * frame, 0.2f, 0.3f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    glUseProgram(shared_program);
    glUniform1f(glGetUniformLocation(shared_program, "u_angle"), 0.5f * frame);
    glUniform4fv(glGetUniformLocation(shared_program, "u_color"), 1, color);
    glEnableVertexAttribArray(0);
    glDrawArrays(GL_TRIANGLES, 0, 3);
    glDisableVertexAttribArray(0);
}

static void *worker_main(void *arg)
{
    static const GLfloat green[4] = {0.0f, 1.0f, 0.0f, 1.0f};
    GLubyte pixel[4];
    (void)arg;

    for (int frame = 0; frame < NFRAMES; frame++) {
        wait_turn(1);
        if (frame == 0 && !eglMakeCurrent(dpy, worker_surf, worker_surf, worker_ctx))
            die("eglMakeCurrent (worker)");
        debug_marker("worker: début de trame\n");
        /* Client-side vertex array: no buffer object bound. */
        glBindBuffer(GL_ARRAY_BUFFER, 0);
        glVertexAttribPointer(0, 2, GL_FLOAT, GL_FALSE, 0, triangle);
        draw_frame(frame, green);
        if (!eglSwapBuffers(dpy, worker_surf))
            die("eglSwapBuffers (worker)");
        give_turn(0);
    }

    /* The main thread is now entering eglClientWaitSyncKHR: give it time
     * to be inside it, then make the last calls while it waits. */
    struct timespec pause = {0, SLEEP_MS * 1000L * 1000L};
    nanosleep(&pause, NULL);
    glReadPixels(WIDTH / 2, HEIGHT / 2, 1, 1, GL_RGBA, GL_UNSIGNED_BYTE, pixel);
    debug_marker("worker: last calls\twhile main waits");
    glFinish();
    eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    return NULL;
}

int main(void)
{
    static const EGLint config_attribs[] = {
        EGL_SURFACE_TYPE, EGL_PBUFFER_BIT,
        EGL_RENDERABLE_TYPE, EGL_OPENGL_ES2_BIT,
        EGL_RED_SIZE, 8, EGL_GREEN_SIZE, 8, EGL_BLUE_SIZE, 8, EGL_ALPHA_SIZE, 8,
        EGL_NONE
    };
    static const EGLint pbuffer_attribs[] = {
        EGL_WIDTH, WIDTH, EGL_HEIGHT, HEIGHT, EGL_NONE
    };
    static const EGLint context_attribs[] = {
        EGL_CONTEXT_CLIENT_VERSION, 2, EGL_NONE
    };
    static const GLfloat red[4] = {1.0f, 0.0f, 0.0f, 1.0f};
    PFNEGLGETPLATFORMDISPLAYEXTPROC get_platform_display;
    EGLint major, minor, nconfigs = 0;
    GLuint vbo;
    pthread_t worker;

    get_platform_display = (PFNEGLGETPLATFORMDISPLAYEXTPROC)
        eglGetProcAddress("eglGetPlatformDisplayEXT");
    if (!get_platform_display)
        die("eglGetProcAddress(eglGetPlatformDisplayEXT)");
    dpy = get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, NULL);
    if (dpy == EGL_NO_DISPLAY || !eglInitialize(dpy, &major, &minor))
        die("eglInitialize");
    if (!eglBindAPI(EGL_OPENGL_ES_API))
        die("eglBindAPI");
    if (!eglChooseConfig(dpy, config_attribs, &config, 1, &nconfigs) || nconfigs < 1)
        die("eglChooseConfig");

    p_eglCreateSyncKHR = (PFNEGLCREATESYNCKHRPROC)eglGetProcAddress("eglCreateSyncKHR");
    p_eglClientWaitSyncKHR = (PFNEGLCLIENTWAITSYNCKHRPROC)eglGetProcAddress("eglClientWaitSyncKHR");
    p_eglSignalSyncKHR = (PFNEGLSIGNALSYNCKHRPROC)eglGetProcAddress("eglSignalSyncKHR");
    p_eglDestroySyncKHR = (PFNEGLDESTROYSYNCKHRPROC)eglGetProcAddress("eglDestroySyncKHR");
    if (!p_eglCreateSyncKHR || !p_eglClientWaitSyncKHR || !p_eglSignalSyncKHR || !p_eglDestroySyncKHR)
        die("EGL_KHR_reusable_sync entry points");

    main_surf = eglCreatePbufferSurface(dpy, config, pbuffer_attribs);
    worker_surf = eglCreatePbufferSurface(dpy, config, pbuffer_attribs);
    if (main_surf == EGL_NO_SURFACE || worker_surf == EGL_NO_SURFACE)
        die("eglCreatePbufferSurface");
    main_ctx = eglCreateContext(dpy, config, EGL_NO_CONTEXT, context_attribs);
    worker_ctx = eglCreateContext(dpy, config, main_ctx, context_attribs);
    if (main_ctx == EGL_NO_CONTEXT || worker_ctx == EGL_NO_CONTEXT)
        die("eglCreateContext");
    if (!eglMakeCurrent(dpy, main_surf, main_surf, main_ctx))
        die("eglMakeCurrent (main)");

    p_glDebugMessageInsertKHR = (PFNGLDEBUGMESSAGEINSERTKHRPROC)
        eglGetProcAddress("glDebugMessageInsertKHR");
    p_glObjectLabelKHR = (PFNGLOBJECTLABELKHRPROC)eglGetProcAddress("glObjectLabelKHR");

    build_program();
    glGenBuffers(1, &vbo);
    glBindBuffer(GL_ARRAY_BUFFER, vbo);
    glBufferData(GL_ARRAY_BUFFER, sizeof triangle, triangle, GL_STATIC_DRAW);
    glVertexAttribPointer(0, 2, GL_FLOAT, GL_FALSE, 0, (const void *)0);
    glFinish(); /* the program must be complete before the worker uses it */

    done_sync = p_eglCreateSyncKHR(dpy, EGL_SYNC_REUSABLE_KHR, NULL);
    if (done_sync == EGL_NO_SYNC_KHR)
        die("eglCreateSyncKHR");

    turn = 0;
    if (pthread_create(&worker, NULL, worker_main, NULL) != 0)
        die("pthread_create");

    for (int frame = 0; frame < NFRAMES; frame++) {
        wait_turn(0);
        debug_marker(frame == 0 ? "main: première trame\n\tfirst frame" : "main: trame");
        draw_frame(frame, red);
        if (!eglSwapBuffers(dpy, main_surf))
            die("eglSwapBuffers (main)");
        give_turn(1);
    }

    /* Blocks for WAIT_MS: nobody signals the sync meanwhile. */
    wait_turn(0);
    if (p_eglClientWaitSyncKHR(dpy, done_sync, 0, WAIT_MS * 1000000ULL) != EGL_TIMEOUT_EXPIRED_KHR)
        die("eglClientWaitSyncKHR (timeout)");
    pthread_join(worker, NULL);
    if (!p_eglSignalSyncKHR(dpy, done_sync, EGL_SIGNALED_KHR))
        die("eglSignalSyncKHR");
    if (p_eglClientWaitSyncKHR(dpy, done_sync, 0, EGL_FOREVER_KHR) != EGL_CONDITION_SATISFIED_KHR)
        die("eglClientWaitSyncKHR (signaled)");

    p_eglDestroySyncKHR(dpy, done_sync);
    glDeleteBuffers(1, &vbo);
    glDeleteProgram(shared_program);
    eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    eglDestroyContext(dpy, worker_ctx);
    eglDestroyContext(dpy, main_ctx);
    eglDestroySurface(dpy, worker_surf);
    eglDestroySurface(dpy, main_surf);
    eglTerminate(dpy);
    printf("egl_two_threads: %d frames per thread, done\n", NFRAMES);
    return 0;
}
