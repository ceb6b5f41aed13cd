/*
 * persistent_map.c - a small headless EGL / OpenGL 4.5 core program that feeds
 * the GPU the way modern engines do, written to be traced by
 * `apitrace trace --api egl` (see ../record.sh).
 *
 * What the trace it produces contains:
 *   - a desktop GL 4.5 core context on Mesa's surfaceless platform, one
 *     pbuffer surface, NFRAMES frames ended by eglSwapBuffers;
 *   - three buffers made with glBufferStorage and mapped ONCE with
 *     GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT, all three mapped at the same
 *     time and for the whole run, on the same binding target (GL_ARRAY_BUFFER):
 *     vertex positions, per-instance offsets and colours, and a uniform block;
 *     each frame writes new data into them before drawing;
 *   - a fourth buffer mapped persistently with GL_MAP_FLUSH_EXPLICIT_BIT (no
 *     coherent bit), written and flushed with glFlushMappedBufferRange;
 *   - every frame, a fifth buffer on the same GL_ARRAY_BUFFER target mapped
 *     with glMapBufferRange and unmapped again while the persistent ones stay
 *     mapped, and a sixth through DSA (glMapNamedBufferRange /
 *     glUnmapNamedBuffer);
 *   - instanced draws (glDrawArraysInstanced) reading all of them, and a fence
 *     per frame (glFenceSync / glClientWaitSync) before the data is rewritten.
 * Every frame looks different, so a replay that loses any of the writes draws
 * a wrong frame.
 */
#define GL_GLEXT_PROTOTYPES 1
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/glcorearb.h>
#include <string.h>

#define PROGRAM "persistent_map"
#define NFRAMES 4
#define WIDTH 96
#define HEIGHT 64
#include "headless.h"
#define INSTANCES 6

#define PERSISTENT (GL_MAP_WRITE_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT)

static const char *vs_src =
    "#version 450 core\n"
    "layout(location = 0) in vec2 pos;\n"
    "layout(location = 1) in vec4 inst;\n"      /* xy offset, z scale, w hue */
    "layout(location = 2) in vec2 wobble;\n"
    "layout(std140, binding = 0) uniform Frame { vec4 tint; vec4 shift; };\n"
    "out vec4 colour;\n"
    "void main() {\n"
    "    gl_Position = vec4(pos * inst.z + inst.xy + shift.xy + wobble, 0.0, 1.0);\n"
    "    colour = vec4(inst.w, 1.0 - inst.w, 0.5, 1.0) * tint;\n"
    "}\n";

static const char *fs_src =
    "#version 450 core\n"
    "in vec4 colour;\n"
    "out vec4 frag;\n"
    "void main() { frag = colour; }\n";

static void *storage(GLuint *buffer, GLsizeiptr size, GLbitfield flags)
{
    glGenBuffers(1, buffer);
    glBindBuffer(GL_ARRAY_BUFFER, *buffer);
    glBufferStorage(GL_ARRAY_BUFFER, size, NULL, flags & ~GL_MAP_FLUSH_EXPLICIT_BIT);
    void *p = glMapBufferRange(GL_ARRAY_BUFFER, 0, size, flags);
    if (!p)
        die("glMapBufferRange (persistent)");
    return p;
}

int main(void)
{
    static const EGLint context_attribs[] = {
        EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 5,
        EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
    EGLSurface surf;
    EGLDisplay dpy = open_headless(EGL_OPENGL_API, EGL_OPENGL_BIT, context_attribs, &surf);

    GLuint program = glCreateProgram();
    glAttachShader(program, shader(GL_VERTEX_SHADER, vs_src));
    glAttachShader(program, shader(GL_FRAGMENT_SHADER, fs_src));
    glLinkProgram(program);
    glUseProgram(program);

    GLuint vao;
    glGenVertexArrays(1, &vao);
    glBindVertexArray(vao);

    GLuint positions, instances, frame_block, wobbles, scratch, dsa;
    float *pos = storage(&positions, 6 * 2 * sizeof(float), PERSISTENT);
    float *inst = storage(&instances, INSTANCES * 4 * sizeof(float), PERSISTENT);
    float *block = storage(&frame_block, 8 * sizeof(float), PERSISTENT);
    float *wob = storage(&wobbles, 6 * 2 * sizeof(float),
                         GL_MAP_WRITE_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_FLUSH_EXPLICIT_BIT);

    glBindBuffer(GL_ARRAY_BUFFER, positions);
    glVertexAttribPointer(0, 2, GL_FLOAT, GL_FALSE, 0, (void *)0);
    glEnableVertexAttribArray(0);
    glBindBuffer(GL_ARRAY_BUFFER, instances);
    glVertexAttribPointer(1, 4, GL_FLOAT, GL_FALSE, 0, (void *)0);
    glVertexAttribDivisor(1, 1);
    glEnableVertexAttribArray(1);
    glBindBuffer(GL_ARRAY_BUFFER, wobbles);
    glVertexAttribPointer(2, 2, GL_FLOAT, GL_FALSE, 0, (void *)0);
    glEnableVertexAttribArray(2);
    glBindBufferBase(GL_UNIFORM_BUFFER, 0, frame_block);

    /* two ordinary buffers, mapped and unmapped every frame */
    glGenBuffers(1, &scratch);
    glBindBuffer(GL_ARRAY_BUFFER, scratch);
    glBufferData(GL_ARRAY_BUFFER, 256, NULL, GL_STREAM_DRAW);
    glCreateBuffers(1, &dsa);
    glNamedBufferData(dsa, 256, NULL, GL_STREAM_DRAW);

    glViewport(0, 0, WIDTH, HEIGHT);
    GLsync fence = 0;
    for (int frame = 0; frame < NFRAMES; frame++) {
        if (fence) {
            glClientWaitSync(fence, GL_SYNC_FLUSH_COMMANDS_BIT, 1000000000);
            glDeleteSync(fence);
        }
        float t = (float)frame;
        const float tri[12] = {-0.1f, -0.1f, 0.1f, -0.1f, 0.0f, 0.1f + 0.05f * t,
                               -0.1f, 0.1f, 0.1f, 0.1f, 0.0f, -0.1f - 0.05f * t};
        memcpy(pos, tri, sizeof tri);
        for (int i = 0; i < INSTANCES; i++) {
            float *o = inst + 4 * i;
            o[0] = -0.8f + 0.3f * i + 0.02f * t;
            o[1] = -0.6f + 0.2f * ((i + frame) % 3);
            o[2] = 1.0f + 0.3f * ((i * 7 + frame) % 4);
            o[3] = (float)((i + frame) % INSTANCES) / INSTANCES;
        }
        const float frame_data[8] = {1.0f, 0.6f + 0.1f * t, 1.0f - 0.2f * t, 1.0f,
                                     0.05f * t, -0.03f * t, 0.0f, 0.0f};
        memcpy(block, frame_data, sizeof frame_data);
        for (int v = 0; v < 6; v++) {
            wob[2 * v] = 0.01f * (float)((v + frame) % 3);
            wob[2 * v + 1] = -0.02f * (float)((v * frame) % 2);
        }
        glBindBuffer(GL_ARRAY_BUFFER, wobbles);
        glFlushMappedBufferRange(GL_ARRAY_BUFFER, 0, 6 * 2 * sizeof(float));

        /* another buffer on the same target: mapped and unmapped between the draws */
        glBindBuffer(GL_ARRAY_BUFFER, scratch);
        unsigned char *s = glMapBufferRange(GL_ARRAY_BUFFER, 0, 256,
                                            GL_MAP_WRITE_BIT | GL_MAP_INVALIDATE_BUFFER_BIT);
        memset(s, frame, 256);
        glUnmapBuffer(GL_ARRAY_BUFFER);
        unsigned char *d = glMapNamedBufferRange(dsa, 0, 64, GL_MAP_WRITE_BIT);
        memset(d, 255 - frame, 64);
        glUnmapNamedBuffer(dsa);

        glClearColor(0.1f * t, 0.1f, 0.2f, 1.0f);
        glClear(GL_COLOR_BUFFER_BIT);
        glDrawArraysInstanced(GL_TRIANGLES, 0, 3, INSTANCES);
        glDrawArraysInstanced(GL_TRIANGLES, 3, 3, INSTANCES / 2);
        fence = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
        eglSwapBuffers(dpy, surf);
    }
    glClientWaitSync(fence, GL_SYNC_FLUSH_COMMANDS_BIT, 1000000000);
    glDeleteSync(fence);
    eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    eglTerminate(dpy);
    return 0;
}
