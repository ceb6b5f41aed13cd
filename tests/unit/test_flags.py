"""Name-derived call flags and profiled draws.

Expected values are apitrace's, read from its sources: the table and regular
expressions of lib/trace/trace_parser_flags.cpp (and the expectations of its
trace_parser_flags_test.cpp), Parser::adjust_call_flags in lib/trace/trace_parser.cpp,
and profileDraw in retrace/glretrace.py.
"""

from __future__ import annotations

import pytest

from retrace.trace import flags as flags_module
from retrace.trace.flags import CallFlag, adjust_flags, call_flags, is_profiled_draw

NSE = CallFlag.NO_SIDE_EFFECTS

EXPECTED_FLAGS: dict[str, CallFlag] = {
    # GL draws (draw regex)
    "glDrawArrays": CallFlag.RENDER,
    "glDrawArraysInstancedBaseInstance": CallFlag.RENDER,
    "glDrawElementsInstancedBaseVertexBaseInstance": CallFlag.RENDER,
    "glMultiDrawElementsIndirect": CallFlag.RENDER,
    "glMultiDrawArraysIndirectCountARB": CallFlag.RENDER,
    "glMultiModeDrawElementsIBM": CallFlag.RENDER,
    "glDrawRangeElements": CallFlag.RENDER,
    "glDrawMeshArraysSUN": CallFlag.RENDER,
    # APPLE element arrays: "ElementArray" is not "Elements" (0 in apitrace's test)
    "glMultiDrawElementArrayAPPLE": CallFlag.NONE,
    "glMultiDrawRangeElementArrayAPPLE": CallFlag.NONE,
    # other GL draws (misc-draw regex)
    "glClear": CallFlag.RENDER,
    "glCallList": CallFlag.RENDER,
    "glCallLists": CallFlag.RENDER,
    "glRectf": CallFlag.RENDER,
    "glRectsv": CallFlag.RENDER,
    "glEvalMesh2": CallFlag.RENDER,
    "glBlitFramebuffer": CallFlag.RENDER,
    "glBlitFramebufferANGLE": CallFlag.RENDER,
    "glDrawPixels": CallFlag.RENDER,
    "glDrawTransformFeedbackStreamInstanced": CallFlag.RENDER,
    "glEnd": CallFlag.RENDER,
    "glClearColor": CallFlag.NONE,
    "glClearBufferfv": CallFlag.NONE,
    "glBegin": CallFlag.NONE,
    # render-target binds (fbo regex)
    "glBindFramebuffer": CallFlag.SWAP_RENDERTARGET,
    "glBindFramebufferEXT": CallFlag.SWAP_RENDERTARGET,
    "glBindFramebufferOES": CallFlag.SWAP_RENDERTARGET,
    # GL queries: get regex, then table
    "glGetFloatv": NSE,
    "glGetIntegerv": NSE,
    "glGetInteger64i_v": NSE,
    "glGetTexLevelParameteriv": NSE,
    "glGetTextureParameterIuiv": NSE,
    "glGetVertexAttribPointerv": NSE,
    "glGetDoublev": NSE,
    "glGetBooleanv": NSE,
    "glGetError": NSE,
    "glGetString": NSE | CallFlag.VERBOSE,
    "glGetStringi": NSE | CallFlag.VERBOSE,
    "glIsEnabled": NSE | CallFlag.VERBOSE,
    "glIsTexture": NSE | CallFlag.VERBOSE,
    "glObjectLabel": NSE,
    # window-system calls
    "glXSwapBuffers": CallFlag.SWAPBUFFERS,
    "eglSwapBuffers": CallFlag.SWAPBUFFERS,
    "eglSwapBuffersWithDamageKHR": CallFlag.SWAPBUFFERS,
    "wglSwapBuffers": CallFlag.SWAPBUFFERS,
    "wglSwapLayerBuffers": CallFlag.SWAPBUFFERS,
    "CGLFlushDrawable": CallFlag.END_FRAME,
    "glFrameTerminatorGREMEDY": CallFlag.END_FRAME,
    "glXGetProcAddressARB": NSE | CallFlag.VERBOSE,
    "wglGetProcAddress": NSE | CallFlag.VERBOSE,
    "CGLGetCurrentContext": NSE | CallFlag.VERBOSE,
    "eglGetConfigAttrib": CallFlag.VERBOSE,
    "glXGetFBConfigAttrib": CallFlag.VERBOSE,
    "eglSetDamageRegionKHR": NSE,
    # markers
    "glPushDebugGroup": CallFlag.MARKER | CallFlag.MARKER_PUSH,
    "glPopDebugGroupKHR": CallFlag.MARKER | CallFlag.MARKER_POP,
    "glStringMarkerGREMEDY": CallFlag.MARKER,
    "glDebugMessageInsert": NSE | CallFlag.MARKER,
    "glInsertEventMarkerEXT": NSE | CallFlag.MARKER,
    "D3DPERF_BeginEvent": CallFlag.MARKER | CallFlag.MARKER_PUSH,
    "ID3DUserDefinedAnnotation::EndEvent": CallFlag.MARKER | CallFlag.MARKER_POP,
    # DXGI / D3D10 / D3D11 (regexes)
    "IDXGISwapChain::Present": CallFlag.END_FRAME,
    "IDXGISwapChain1::Present1": CallFlag.END_FRAME,
    "IDXGIDecodeSwapChain::PresentBuffer": CallFlag.END_FRAME,
    "ID3D11DeviceContext::DrawIndexed": CallFlag.RENDER,
    "ID3D11DeviceContext1::DrawInstancedIndirect": CallFlag.RENDER,
    "ID3D11DeviceContext::ExecuteCommandList": CallFlag.RENDER,
    "ID3D10Device1::DrawAuto": CallFlag.RENDER,
    "ID3D10Device::OMSetRenderTargets": CallFlag.SWAP_RENDERTARGET,
    "ID3D11DeviceContext1::OMSetRenderTargets": CallFlag.SWAP_RENDERTARGET,
    "ID3D11Device::CheckMultisampleQualityLevels": NSE | CallFlag.VERBOSE,
    "ID3D10Device1::CheckMultisampleQualityLevels": NSE | CallFlag.VERBOSE,
    # D3D 2-9 (table)
    "IDirect3DDevice9::Present": CallFlag.SWAPBUFFERS,
    "IDirect3DDevice9Ex::PresentEx": CallFlag.SWAPBUFFERS,
    "IDirect3DSwapChain9::Present": CallFlag.SWAPBUFFERS,
    "IDirect3DDevice9::GetRenderTargetData": CallFlag.END_FRAME,
    "IDirect3DDevice8::SetRenderTarget": CallFlag.SWAP_RENDERTARGET,
    "IDirect3DDevice9::Clear": CallFlag.RENDER,
    "IDirect3DDevice7::DrawPrimitiveVB": CallFlag.RENDER,
    "IDirect3DDevice2::DrawIndexedPrimitive": CallFlag.RENDER,
    "IDirect3DViewport3::Clear2": CallFlag.RENDER,
    "IDirect3D9::GetDeviceCaps": NSE | CallFlag.VERBOSE,
    "IDirect3DDevice9Ex::GetDeviceCaps": NSE | CallFlag.VERBOSE,
    # names no rule and no table entry covers
    "glFooBarUnknown": CallFlag.NONE,
    "glViewport": CallFlag.NONE,
    "memcpy": CallFlag.NONE,
    "": CallFlag.NONE,
    # regex_match must match the whole name
    "glBindFramebuffers": CallFlag.NONE,  # [0-9A-Z]* suffix only
    "glGetFloat": CallFlag.NONE,  # \w+ needs at least one character
    "glDrawArrays2": CallFlag.NONE,  # suffix is [A-Z][a-zA-Z]*
    "IDXGISwapChain::GetBuffer": CallFlag.NONE,
    "glClear\n": CallFlag.NONE,
}


@pytest.mark.parametrize(("name", "expected"), EXPECTED_FLAGS.items())
def test_call_flags(name: str, expected: CallFlag) -> None:
    result = call_flags(name)
    assert isinstance(result, CallFlag)
    assert result == expected


def test_swapbuffers_is_end_frame_and_swap_rendertarget() -> None:
    assert CallFlag.SWAPBUFFERS == CallFlag.END_FRAME | CallFlag.SWAP_RENDERTARGET


def test_table_groups_are_disjoint() -> None:
    # A name listed under two flag combinations would silently take the later one.
    groups = flags_module._TABLE_GROUPS
    assert sum(len(names) for _, names in groups) == len(flags_module._TABLE)


@pytest.mark.parametrize(
    ("name", "ret", "num_args", "expected"),
    [
        ("glGetError", 0, 0, NSE | CallFlag.VERBOSE),  # GL_NO_ERROR
        ("glGetError", 0x500, 0, NSE),  # GL_INVALID_ENUM
        ("glGetError", None, 0, NSE),  # no return value recorded
        ("glGetError", 0, 1, NSE),  # only the zero-argument signature
        ("glGetGraphicsResetStatusARB", 0, 0, NSE),  # only glGetError
    ],
)
def test_adjust_flags(name: str, ret: int | None, num_args: int, expected: CallFlag) -> None:
    assert adjust_flags(name, call_flags(name), ret, num_args=num_args) == expected


def test_adjust_flags_defaults_to_zero_arguments() -> None:
    assert adjust_flags("glGetError", NSE, 0) == NSE | CallFlag.VERBOSE


PROFILED_DRAWS = [
    "glDrawArrays",
    "glDrawArraysIndirect",
    "glDrawElementsInstancedBaseVertexBaseInstance",
    "glMultiDrawElementsIndirect",
    "glMultiDrawArraysIndirectCount",
    "glMultiModeDrawArraysIBM",
    "glDrawRangeElements",
    "glDrawRangeElementsBaseVertex",
    "glCallList",
    "glCallLists",
    "glClear",
    "glDrawPixels",
    "glDrawTransformFeedback",
    "glDrawTransformFeedbackStreamInstanced",
    "glBlitFramebuffer",
    "glBlitFramebufferEXT",
    "glRectf",
    "glRectiv",
    "glEvalMesh1",
    "glEvalMesh2",
    "glBegin",
    "glEnd",  # misc-draw regex; the glBegin..glEnd query ends here
    "glDispatchCompute",
    "glDispatchComputeIndirect",
    "glDispatchComputeGroupSizeARB",
]

NOT_PROFILED_DRAWS = [
    "glDrawMeshArraysSUN",  # RENDER, but glretrace's draw regexes have no Mesh
    "glDrawMeshTasksEXT",
    "glDrawElementArrayAPPLE",
    "glClearColor",
    "glClearBufferfv",
    "glBlitNamedFramebuffer",
    "glBindFramebuffer",
    "glEndList",
    "glBeginQuery",
    "glBeginTransformFeedback",
    "glViewport",
    "glXSwapBuffers",
    "ID3D11DeviceContext::DrawIndexed",
    "",
]


@pytest.mark.parametrize("name", PROFILED_DRAWS)
def test_is_profiled_draw(name: str) -> None:
    assert is_profiled_draw(name)


@pytest.mark.parametrize("name", NOT_PROFILED_DRAWS)
def test_is_not_profiled_draw(name: str) -> None:
    assert not is_profiled_draw(name)
