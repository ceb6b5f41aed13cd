"""`retrace.gl.work`: the calls GPU Busy times, decided from the registry's commands."""

from __future__ import annotations

import pytest

from retrace.gl.registry import load_registry
from retrace.gl.work import gpu_work_commands, makes_gpu_work
from retrace.trace.flags import is_profiled_draw


@pytest.mark.parametrize(
    "name",
    [
        "glDrawArrays",
        "glMultiDrawElementsIndirectCount",
        "glDrawMeshTasksNV",
        "glDispatchComputeIndirect",
        "glClear",
        "glClearBufferfv",
        "glClearNamedFramebufferfi",
        "glClearTexSubImage",
        "glBlitNamedFramebuffer",
        "glCopyImageSubData",
        "glCopyTexSubImage2D",
        "glGenerateMipmap",
        "glReadPixels",
        "glCallList",
        "glBegin",
        "glEnd",
        "glRectf",
    ],
)
def test_calls_that_make_the_gpu_work(name):
    assert makes_gpu_work(name)


@pytest.mark.parametrize(
    "name",
    [
        "glClearColor",  # state the next clear reads
        "glClearDepthf",
        "glClearStencil",
        "glDrawBuffers",  # which buffers draws write
        "glNamedFramebufferDrawBuffer",
        "glListDrawCommandsStatesClientNV",
        "glCopyPathNV",  # a path object, on the CPU
        "glUniform4fv",
        "glTexImage2D",  # an upload from client memory: the driver copies it
        "glFlush",
        "glFinish",
        "glColor4f",
        "glNoSuchFunction",
        "eglSwapBuffers",
    ],
)
def test_calls_that_do_not(name):
    assert not makes_gpu_work(name)


def test_every_draw_glretrace_profiles_is_gpu_work_and_every_name_is_the_registrys():
    commands = load_registry("gl").commands
    work = gpu_work_commands()
    assert {name for name in commands if is_profiled_draw(name)} <= work
    assert work <= set(commands)
