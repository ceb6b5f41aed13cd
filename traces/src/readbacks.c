/*
 * readbacks.c - a small headless EGL / OpenGL 4.5 compatibility program that reads back
 * what it draws and what its textures hold the way screenshot tools, tiled renderers and
 * editors do, written to be traced by `apitrace trace --api egl` (see ../record.sh).
 *
 *   readbacks pixels    every frame: glReadPixels of the frame under each pack state --
 *                       a 64 x 64 RGBA float tile into a 4096-pixel-wide image
 *                       (GL_PACK_ROW_LENGTH 4096, the call glretrace crashes on), skipped
 *                       rows and pixels, alignment 8 with odd-width RGB rows, state pushed
 *                       and popped with glPushClientAttrib, glReadnPixels, a readback into
 *                       a pixel-pack buffer at an offset; and glGet* of many values
 *                       (GL_COMPRESSED_TEXTURE_FORMATS, matrices, GL_VIEWPORT), glGenTextures
 *                       of 16 names
 *   readbacks textures  once: textures of every dimensionality (1D, 2D with levels, 3D,
 *                       1D and 2D arrays, a cube map, a cube map array, a compressed RGTC1
 *                       texture) read back with glGetTexImage, glGetnTexImage,
 *                       glGetTextureImage, glGetTextureSubImage, glGetCompressedTexImage,
 *                       glGetnCompressedTexImage and glGetCompressedTextureImage under pack
 *                       state (image height and image skips for 3D, compressed block state)
 *   readbacks plain     the same frames without any readback or pixel-store call: the
 *                       reference the replays of both must draw identically
 *
 * Every frame draws the same textured triangles, changing each frame. The program checks
 * its own readbacks (a pixel of the tile, a texel of each texture), so the trace records a
 * program that read what it meant to.
 */
#define GL_GLEXT_PROTOTYPES 1
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/gl.h>
#include <GL/glext.h>
#include <string.h>

#define PROGRAM "readbacks"
#define NFRAMES 3
#define WIDTH 64
#define HEIGHT 64
#include "headless.h"

#define TILE_STRIDE 4096 /* pixels: the width of the image the tile is copied into */
#define T 8              /* texture side */

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, PROGRAM ": wrong readback: %s\n", what);
        exit(1);
    }
}

static const char *vs_src =
    "#version 330 core\n"
    "layout(location = 0) in vec2 pos;\n"
    "uniform float shift;\n"
    "out vec2 uv;\n"
    "void main() { uv = pos * 0.5 + 0.5; gl_Position = vec4(pos.x + shift, pos.y, 0.0, 1.0); }\n";

static const char *fs_src =
    "#version 330 core\n"
    "in vec2 uv;\n"
    "uniform sampler2D image;\n"
    "out vec4 frag;\n"
    "void main() { frag = texture(image, uv) * vec4(uv, 1.0, 1.0); }\n";

static void draw(GLuint program, int frame)
{
    glClearColor(0.1f * (float)frame, 0.2f, 0.3f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    glUniform1f(glGetUniformLocation(program, "shift"), 0.2f * (float)frame - 0.2f);
    glDrawArrays(GL_TRIANGLES, 0, 6);
}

static void read_pixels(int frame)
{
    /* the tile of a bigger image: rows TILE_STRIDE pixels apart */
    float *image = calloc((size_t)TILE_STRIDE * HEIGHT * 4, sizeof(float));
    glPixelStorei(GL_PACK_ROW_LENGTH, TILE_STRIDE);
    glReadPixels(0, 0, 64, 64, GL_RGBA, GL_FLOAT, image);
    float clear_red = 0.1f * (float)frame;
    check(image[0] > clear_red - 0.01f && image[0] < clear_red + 0.01f, "tile corner");
    /* skipped rows and pixels of the same image */
    glPixelStorei(GL_PACK_SKIP_ROWS, 3);
    glPixelStorei(GL_PACK_SKIP_PIXELS, 100);
    glReadPixels(0, 0, 32, 16, GL_RGBA, GL_UNSIGNED_BYTE, image);
    glPixelStorei(GL_PACK_SKIP_ROWS, 0);
    glPixelStorei(GL_PACK_SKIP_PIXELS, 0);
    /* rows of 13 RGB pixels padded to 8 bytes */
    glPixelStorei(GL_PACK_ROW_LENGTH, 0);
    glPixelStorei(GL_PACK_ALIGNMENT, 8);
    unsigned char rgb[64 * 48];
    glReadPixels(1, 2, 13, 7, GL_RGB, GL_UNSIGNED_BYTE, rgb);
    glPixelStorei(GL_PACK_ALIGNMENT, 4);
    /* state pushed, changed and popped: the pop brings the row length of 4096 back */
    glPixelStorei(GL_PACK_ROW_LENGTH, TILE_STRIDE);
    glPushClientAttrib(GL_CLIENT_PIXEL_STORE_BIT);
    glPixelStorei(GL_PACK_ROW_LENGTH, 16);
    glPopClientAttrib();
    glReadPixels(0, 0, 64, 64, GL_RGBA, GL_FLOAT, image);
    glPixelStorei(GL_PACK_ROW_LENGTH, 0);
    /* the robust variant, told the size */
    glReadnPixels(0, 0, 8, 8, GL_RGBA, GL_UNSIGNED_BYTE, 8 * 8 * 4, rgb);
    /* into a pack buffer, at an offset, with skipped pixels */
    GLuint pbo;
    glGenBuffers(1, &pbo);
    glBindBuffer(GL_PIXEL_PACK_BUFFER, pbo);
    glBufferData(GL_PIXEL_PACK_BUFFER, 64 * 64 * 4 + 256, NULL, GL_STREAM_READ);
    glPixelStorei(GL_PACK_SKIP_PIXELS, 2);
    glReadPixels(0, 0, 32, 32, GL_RGBA, GL_UNSIGNED_BYTE, (void *)(uintptr_t)256);
    glPixelStorei(GL_PACK_SKIP_PIXELS, 0);
    glBindBuffer(GL_PIXEL_PACK_BUFFER, 0);
    glDeleteBuffers(1, &pbo);
    free(image);
}

static void get_many(void)
{
    GLint count = 0, viewport[4], dims[2];
    glGetIntegerv(GL_NUM_COMPRESSED_TEXTURE_FORMATS, &count);
    GLint *formats = calloc((size_t)count + 1, sizeof(GLint));
    glGetIntegerv(GL_COMPRESSED_TEXTURE_FORMATS, formats);
    check(count > 0 && formats[0] != 0, "compressed formats");
    free(formats);
    glGetIntegerv(GL_VIEWPORT, viewport);
    check(viewport[2] == WIDTH, "viewport");
    glGetIntegerv(GL_MAX_VIEWPORT_DIMS, dims);
    GLfloat matrix[16];
    glGetFloatv(GL_MODELVIEW_MATRIX, matrix);
    check(matrix[0] == 1.0f && matrix[15] == 1.0f, "modelview matrix");
    GLdouble range[2];
    glGetDoublev(GL_DEPTH_RANGE, range);
    GLuint names[16];
    glGenTextures(16, names);
    glDeleteTextures(16, names);
}

/* a T x T x depth RGBA8 pattern, different per texel and per `seed` */
static unsigned char *pattern(int depth, int seed)
{
    unsigned char *p = malloc((size_t)T * T * depth * 4);
    for (int i = 0; i < T * T * depth * 4; i++)
        p[i] = (unsigned char)(i * 7 + seed * 31);
    return p;
}

static GLuint texture(GLenum target, int depth, int seed)
{
    GLuint tex;
    unsigned char *p = pattern(depth, seed);
    glGenTextures(1, &tex);
    glBindTexture(target, tex);
    switch (target) {
    case GL_TEXTURE_1D:
        glTexImage1D(target, 0, GL_RGBA8, T, 0, GL_RGBA, GL_UNSIGNED_BYTE, p);
        break;
    case GL_TEXTURE_3D:
    case GL_TEXTURE_2D_ARRAY:
    case GL_TEXTURE_CUBE_MAP_ARRAY:
        glTexImage3D(target, 0, GL_RGBA8, T, T, depth, 0, GL_RGBA, GL_UNSIGNED_BYTE, p);
        break;
    case GL_TEXTURE_CUBE_MAP:
        for (int face = 0; face < 6; face++)
            glTexImage2D(GL_TEXTURE_CUBE_MAP_POSITIVE_X + face, 0, GL_RGBA8, T, T, 0, GL_RGBA,
                         GL_UNSIGNED_BYTE, p + face * T * T * 4);
        break;
    default: /* 2D (with its levels) and the 1D array (T layers) */
        glTexImage2D(target, 0, GL_RGBA8, T, T, 0, GL_RGBA, GL_UNSIGNED_BYTE, p);
        if (target == GL_TEXTURE_2D)
            glGenerateMipmap(target);
    }
    glTexParameteri(target, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(target, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    free(p);
    return tex;
}

static GLuint textures_read_back(void)
{
    unsigned char *out = calloc(1 << 20, 1); /* room for every layout below */
    GLuint tex1d = texture(GL_TEXTURE_1D, 1, 1);
    glGetTexImage(GL_TEXTURE_1D, 0, GL_RGBA, GL_UNSIGNED_BYTE, out);
    check(out[5] == (unsigned char)(5 * 7 + 31), "1D texel");

    GLuint tex2d = texture(GL_TEXTURE_2D, 1, 2);
    glPixelStorei(GL_PACK_ROW_LENGTH, 100);
    glPixelStorei(GL_PACK_SKIP_ROWS, 2);
    glPixelStorei(GL_PACK_SKIP_PIXELS, 5);
    glGetTexImage(GL_TEXTURE_2D, 0, GL_RGBA, GL_UNSIGNED_BYTE, out);
    check(out[(2 * 100 + 5) * 4] == (unsigned char)(2 * 31), "2D texel under pack state");
    glGetTexImage(GL_TEXTURE_2D, 1, GL_RGBA, GL_FLOAT, out); /* level 1, floats */
    glGetTexImage(GL_TEXTURE_2D, 3, GL_RGB, GL_UNSIGNED_BYTE, out); /* the 1 x 1 level */
    glGetnTexImage(GL_TEXTURE_2D, 0, GL_RGBA, GL_UNSIGNED_BYTE, 1 << 20, out);
    glGetTextureSubImage(tex2d, 0, 1, 1, 0, 3, 2, 1, GL_RGBA, GL_UNSIGNED_BYTE, 1 << 20, out);
    glPixelStorei(GL_PACK_ROW_LENGTH, 0);
    glPixelStorei(GL_PACK_SKIP_ROWS, 0);
    glPixelStorei(GL_PACK_SKIP_PIXELS, 0);

    GLuint tex1da = texture(GL_TEXTURE_1D_ARRAY, 1, 3);
    glGetTexImage(GL_TEXTURE_1D_ARRAY, 0, GL_RGBA, GL_UNSIGNED_BYTE, out);

    /* 3D images: T rows per image spread to 12, 2 images skipped */
    GLuint tex3d = texture(GL_TEXTURE_3D, 4, 4);
    glPixelStorei(GL_PACK_IMAGE_HEIGHT, 12);
    glPixelStorei(GL_PACK_SKIP_IMAGES, 2);
    glGetTexImage(GL_TEXTURE_3D, 0, GL_RGBA, GL_UNSIGNED_BYTE, out);
    check(out[2 * 12 * T * 4] == (unsigned char)(4 * 31), "3D texel under image skips");
    GLuint tex2da = texture(GL_TEXTURE_2D_ARRAY, 3, 5);
    glGetTexImage(GL_TEXTURE_2D_ARRAY, 0, GL_RGBA, GL_UNSIGNED_BYTE, out);
    GLuint cubes = texture(GL_TEXTURE_CUBE_MAP_ARRAY, 12, 6);
    glGetTexImage(GL_TEXTURE_CUBE_MAP_ARRAY, 0, GL_RGBA, GL_HALF_FLOAT, out);
    GLuint cube = texture(GL_TEXTURE_CUBE_MAP, 6, 7);
    glGetTextureImage(cube, 0, GL_RGBA, GL_UNSIGNED_BYTE, 1 << 20, out); /* all 6 faces */
    glPixelStorei(GL_PACK_IMAGE_HEIGHT, 0);
    glPixelStorei(GL_PACK_SKIP_IMAGES, 0);
    for (int face = 0; face < 6; face++)
        glGetTexImage(GL_TEXTURE_CUBE_MAP_POSITIVE_X + face, 0, GL_BGRA,
                      GL_UNSIGNED_INT_8_8_8_8_REV, out);

    /* a compressed texture, read whole and as blocks laid out by the pack state */
    GLuint rgtc;
    unsigned char *p = pattern(1, 8);
    glGenTextures(1, &rgtc);
    glBindTexture(GL_TEXTURE_2D, rgtc);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_COMPRESSED_RED_RGTC1, T, T, 0, GL_RGBA, GL_UNSIGNED_BYTE, p);
    free(p);
    GLint compressed_size = 0;
    glGetTexLevelParameteriv(GL_TEXTURE_2D, 0, GL_TEXTURE_COMPRESSED_IMAGE_SIZE, &compressed_size);
    check(compressed_size == T * T / 2, "RGTC1 size");
    glGetCompressedTexImage(GL_TEXTURE_2D, 0, out);
    glGetnCompressedTexImage(GL_TEXTURE_2D, 0, compressed_size, out);
    glPixelStorei(GL_PACK_COMPRESSED_BLOCK_WIDTH, 4);
    glPixelStorei(GL_PACK_COMPRESSED_BLOCK_HEIGHT, 4);
    glPixelStorei(GL_PACK_COMPRESSED_BLOCK_SIZE, 8);
    glPixelStorei(GL_PACK_ROW_LENGTH, 64);
    glGetCompressedTextureImage(rgtc, 0, 1 << 20, out);
    glPixelStorei(GL_PACK_ROW_LENGTH, 0);
    glPixelStorei(GL_PACK_COMPRESSED_BLOCK_WIDTH, 0);
    glPixelStorei(GL_PACK_COMPRESSED_BLOCK_HEIGHT, 0);
    glPixelStorei(GL_PACK_COMPRESSED_BLOCK_SIZE, 0);
    free(out);
    GLuint others[] = {tex1d, tex1da, tex3d, tex2da, cubes, cube, rgtc};
    glDeleteTextures(7, others);
    glBindTexture(GL_TEXTURE_2D, tex2d);
    return tex2d;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int textures = strcmp(mode, "textures") == 0, pixels = strcmp(mode, "pixels") == 0;
    if (!textures && !pixels && strcmp(mode, "plain") != 0) {
        fprintf(stderr, "usage: " PROGRAM " pixels|textures|plain\n");
        return 2;
    }
    static const EGLint context_attribs[] = {
        EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 5,
        EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_COMPATIBILITY_PROFILE_BIT, EGL_NONE};
    EGLSurface surf;
    EGLDisplay dpy = open_headless(EGL_OPENGL_API, EGL_OPENGL_BIT, context_attribs, &surf);

    GLuint program = glCreateProgram();
    glAttachShader(program, shader(GL_VERTEX_SHADER, vs_src));
    glAttachShader(program, shader(GL_FRAGMENT_SHADER, fs_src));
    glLinkProgram(program);
    glUseProgram(program);
    static const float quad[] = {-0.8f, -0.8f, 0.8f, -0.8f, 0.8f, 0.8f,
                                 -0.8f, -0.8f, 0.8f, 0.8f,  -0.6f, 0.7f};
    GLuint vao, vbo;
    glGenVertexArrays(1, &vao);
    glBindVertexArray(vao);
    glGenBuffers(1, &vbo);
    glBindBuffer(GL_ARRAY_BUFFER, vbo);
    glBufferData(GL_ARRAY_BUFFER, sizeof quad, quad, GL_STATIC_DRAW);
    glVertexAttribPointer(0, 2, GL_FLOAT, GL_FALSE, 0, 0);
    glEnableVertexAttribArray(0);
    glViewport(0, 0, WIDTH, HEIGHT);

    if (textures)
        textures_read_back();
    else
        texture(GL_TEXTURE_2D, 1, 2); /* the same texture the readbacks leave bound */
    for (int frame = 0; frame < NFRAMES; frame++) {
        draw(program, frame);
        if (pixels) {
            read_pixels(frame);
            get_many();
        }
        eglSwapBuffers(dpy, surf);
    }
    eglTerminate(dpy);
    return 0;
}
