/*
 * headless.h - what our headless EGL test programs share: reporting a failed
 * step, compiling a shader, opening a headless context. Include it after the
 * EGL and GL (or GLES2) headers, with PROGRAM, WIDTH and HEIGHT defined.
 */
#include <stdio.h>
#include <stdlib.h>

static void die(const char *what)
{
    fprintf(stderr, PROGRAM ": %s failed (EGL error 0x%x)\n", what, eglGetError());
    exit(1);
}

static GLuint shader(GLenum type, const char *src)
{
    GLuint s = glCreateShader(type);
    glShaderSource(s, 1, &src, NULL);
    glCompileShader(s);
    GLint ok = 0;
    glGetShaderiv(s, GL_COMPILE_STATUS, &ok);
    if (!ok)
        die("glCompileShader");
    return s;
}

/* A surfaceless EGL display, a WIDTH x HEIGHT RGBA8 pbuffer and a context of `api`
 * (EGL_OPENGL_API or EGL_OPENGL_ES_API) made with `context_attribs`, current. */
static EGLDisplay open_headless(EGLenum api, EGLint renderable, const EGLint *context_attribs,
                                EGLSurface *surface)
{
    EGLDisplay dpy = eglGetPlatformDisplay(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, NULL);
    if (dpy == EGL_NO_DISPLAY || !eglInitialize(dpy, NULL, NULL))
        die("eglInitialize");
    if (!eglBindAPI(api))
        die("eglBindAPI");
    const EGLint config_attribs[] = {
        EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, renderable,
        EGL_RED_SIZE, 8, EGL_GREEN_SIZE, 8, EGL_BLUE_SIZE, 8, EGL_ALPHA_SIZE, 8, EGL_NONE};
    EGLConfig config;
    EGLint n = 0;
    if (!eglChooseConfig(dpy, config_attribs, &config, 1, &n) || n != 1)
        die("eglChooseConfig");
    static const EGLint surface_attribs[] = {EGL_WIDTH, WIDTH, EGL_HEIGHT, HEIGHT, EGL_NONE};
    *surface = eglCreatePbufferSurface(dpy, config, surface_attribs);
    EGLContext ctx = eglCreateContext(dpy, config, EGL_NO_CONTEXT, context_attribs);
    if (*surface == EGL_NO_SURFACE || ctx == EGL_NO_CONTEXT ||
        !eglMakeCurrent(dpy, *surface, *surface, ctx))
        die("context");
    return dpy;
}
