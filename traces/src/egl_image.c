/*
 * egl_image.c - a small headless EGL / OpenGL ES 2 program that shares a
 * texture through an EGLImage, written to be traced by
 * `apitrace trace --api egl` (see ../record.sh).
 *
 * What the trace it produces contains:
 *   - EGL on Mesa's surfaceless platform, a GLES2 context and a pbuffer;
 *   - a source texture filled with a checkerboard (glTexImage2D), turned into
 *     an EGLImage with eglCreateImageKHR(EGL_GL_TEXTURE_2D_KHR) -- the image's
 *     handle in the trace is an address in the traced process;
 *   - a second texture that takes the image's storage with
 *     glEGLImageTargetTexture2DOES, and a quad drawn sampling it, one frame
 *     per colour: the source texture is updated between frames, so a replay
 *     that does not share the storage draws other frames.
 */
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES2/gl2.h>
#include <GLES2/gl2ext.h>

#define PROGRAM "egl_image"
#define NFRAMES 3
#define WIDTH 64
#define HEIGHT 64
#define SIZE 8
#include "headless.h"

static const char *vs_src =
    "attribute vec2 pos;\n"
    "varying vec2 uv;\n"
    "void main() { uv = pos * 0.5 + 0.5; gl_Position = vec4(pos * 0.8, 0.0, 1.0); }\n";
static const char *fs_src =
    "precision mediump float;\n"
    "varying vec2 uv;\n"
    "uniform sampler2D tex;\n"
    "void main() { gl_FragColor = texture2D(tex, uv); }\n";

static void fill(GLuint texture, int frame)
{
    unsigned char pixels[SIZE * SIZE * 4];
    for (int y = 0; y < SIZE; y++)
        for (int x = 0; x < SIZE; x++) {
            unsigned char *p = pixels + 4 * (y * SIZE + x);
            int on = ((x + y + frame) & 1) != 0;
            p[0] = on ? 255 : (unsigned char)(60 * frame);
            p[1] = on ? (unsigned char)(80 * frame) : 40;
            p[2] = on ? 30 : 200;
            p[3] = 255;
        }
    glBindTexture(GL_TEXTURE_2D, texture);
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, SIZE, SIZE, GL_RGBA, GL_UNSIGNED_BYTE, pixels);
}

int main(void)
{
    static const EGLint context_attribs[] = {EGL_CONTEXT_CLIENT_VERSION, 2, EGL_NONE};
    EGLSurface surf;
    EGLDisplay dpy = open_headless(EGL_OPENGL_ES_API, EGL_OPENGL_ES2_BIT, context_attribs, &surf);
    PFNEGLCREATEIMAGEKHRPROC create_image =
        (PFNEGLCREATEIMAGEKHRPROC)eglGetProcAddress("eglCreateImageKHR");
    PFNEGLDESTROYIMAGEKHRPROC destroy_image =
        (PFNEGLDESTROYIMAGEKHRPROC)eglGetProcAddress("eglDestroyImageKHR");
    PFNGLEGLIMAGETARGETTEXTURE2DOESPROC image_target =
        (PFNGLEGLIMAGETARGETTEXTURE2DOESPROC)eglGetProcAddress("glEGLImageTargetTexture2DOES");
    if (!create_image || !destroy_image || !image_target)
        die("EGL_KHR_image_base");

    GLuint source, shared;
    glGenTextures(1, &source);
    glBindTexture(GL_TEXTURE_2D, source);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, SIZE, SIZE, 0, GL_RGBA, GL_UNSIGNED_BYTE, NULL);
    fill(source, 0);
    EGLImageKHR image = create_image(dpy, eglGetCurrentContext(), EGL_GL_TEXTURE_2D_KHR,
                                     (EGLClientBuffer)(size_t)source, NULL);
    if (image == EGL_NO_IMAGE_KHR)
        die("eglCreateImageKHR");
    glGenTextures(1, &shared);
    glBindTexture(GL_TEXTURE_2D, shared);
    image_target(GL_TEXTURE_2D, (GLeglImageOES)image);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);

    GLuint program = glCreateProgram();
    glAttachShader(program, shader(GL_VERTEX_SHADER, vs_src));
    glAttachShader(program, shader(GL_FRAGMENT_SHADER, fs_src));
    glBindAttribLocation(program, 0, "pos");
    glLinkProgram(program);
    glUseProgram(program);
    static const GLfloat quad[] = {-1, -1, 1, -1, -1, 1, 1, 1};
    glVertexAttribPointer(0, 2, GL_FLOAT, GL_FALSE, 0, quad);
    glEnableVertexAttribArray(0);
    glViewport(0, 0, WIDTH, HEIGHT);

    for (int frame = 0; frame < NFRAMES; frame++) {
        if (frame)
            fill(source, frame);
        glBindTexture(GL_TEXTURE_2D, shared);
        glClearColor(0.0f, 0.0f, 0.0f, 1.0f);
        glClear(GL_COLOR_BUFFER_BIT);
        glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
        eglSwapBuffers(dpy, surf);
    }
    destroy_image(dpy, image);
    eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    eglTerminate(dpy);
    return 0;
}
