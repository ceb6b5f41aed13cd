"""Call classification derived from function names, as apitrace's parser does it.

apitrace stores no call flags in the file except FAKE; everything else is
derived from the function name when the signature is first seen, by
``Parser::lookupCallFlags`` (apitrace ``lib/trace/trace_parser_flags.cpp``): a few
regular expressions tried in order, then an exact-name table, else no flags.
``call_flags`` reproduces that result for every name, so that ``dump``, frame
boundaries and replay skipping agree with apitrace's own tools on the same trace.
``adjust_flags`` adds the one per-call adjustment the parser makes afterwards.

``is_profiled_draw`` is a separate notion: what glretrace's generated code
(apitrace ``retrace/glretrace.py``) times as a draw when profiling, which is
not the same set of calls as ``CallFlag.RENDER``.
"""

from __future__ import annotations

import enum
import functools
import re


class CallFlag(enum.IntFlag):
    """Properties of a call; values are retrace's own, the meanings apitrace's."""

    NONE = 0
    FAKE = 1 << 0  # emitted by the tracer, never made by the application (file flag)
    NON_REPRODUCIBLE = 1 << 1
    NO_SIDE_EFFECTS = 1 << 2  # queries: skipped on replay
    RENDER = 1 << 3  # draws, clears, blits
    SWAP_RENDERTARGET = 1 << 4  # binds a new render target (glBindFramebuffer*)
    END_FRAME = 1 << 5
    INCOMPLETE = 1 << 6  # entered but never returned (program died, trace cut off)
    VERBOSE = 1 << 7  # hidden by `dump` unless -v
    MARKER = 1 << 8
    MARKER_PUSH = 1 << 9
    MARKER_POP = 1 << 10
    SWAPBUFFERS = END_FRAME | SWAP_RENDERTARGET


_F = CallFlag

# GL entry points that draw besides the gl*Draw*{Arrays,Elements}* family; the
# trailing [0-9A-Z]* admits vendor suffixes (EXT, NV, ...) but not glClearColor.
_GL_MISC_DRAW = (
    r"gl(?:CallLists?|Clear|End|DrawPixels|DrawTransformFeedback(?:[A-Z][a-zA-Z]*)?"
    r"|BlitFramebuffer|Rect[dfis]v?|EvalMesh[0-9]+)[0-9A-Z]*"
)

# apitrace's regular expressions, in the order it tries them; the first one that
# matches the whole name decides.  apitrace anchors them with ^...$ and uses
# std::regex_match (ECMAScript, whole string); fullmatch with re.ASCII is the same
# test, ASCII making \w and \d mean [A-Za-z0-9_] and [0-9] as they do there.
# apitrace tries the gl* rules only for names starting with 'g' and the D3D rules
# only for names starting with 'I', as `_rules` does.
_PATTERN_TEXTS: dict[str, tuple[tuple[str, CallFlag], ...]] = {
    "g": (
        # GL draws: glDrawArrays, glMultiDrawElementsIndirect, glDrawMeshArraysSUN, ...
        (r"gl(?:[A-Z][a-z]+)*Draw(?:Range|Mesh)?(?:Arrays|Elements)(?:[A-Z][a-zA-Z]*)?", _F.RENDER),
        (_GL_MISC_DRAW, _F.RENDER),
        # glBindFramebuffer, glBindFramebufferEXT, ... (not glBindFramebuffers)
        (r"glBindFramebuffer[0-9A-Z]*", _F.SWAP_RENDERTARGET),
        # glGetFloatv, glGetIntegeri_v, glGetVertexAttribiv, glGetTexLevelParameteriv, ...
        (
            r"gl(?:GetFloat|GetInteger|GetVertexAttrib|GetTex(?:ture)?(?:Level)?Parameter)\w+",
            _F.NO_SIDE_EFFECTS,
        ),
    ),
    "I": (
        # D3D10 device / D3D11 device-context draws and command-list execution
        (r"ID3D1(?:0Device|1DeviceContext)\d*::(?:Draw\w*|ExecuteCommandList)", _F.RENDER),
        (r"ID3D1(?:0Device|1DeviceContext)\d*::OMSetRenderTargets\w*", _F.SWAP_RENDERTARGET),
        # DXGI presents end the frame but, unlike D3D9's, do not swap the render target
        (r"IDXGI(?:Decode)?SwapChain\w*::Present\w*", _F.END_FRAME),
        (
            r"ID3D1[01]Device\d*::(?:CheckFormatSupport|CheckMultisampleQualityLevels)",
            _F.NO_SIDE_EFFECTS | _F.VERBOSE,
        ),
    ),
}


@functools.cache
def _rules(first: str) -> tuple[tuple[re.Pattern[str], CallFlag], ...]:
    """The pattern rules for names starting with `first`, compiled at the first such name
    (a GL replay compiles none of Direct3D's)."""
    return tuple(
        (re.compile(text, re.ASCII), flags) for text, flags in _PATTERN_TEXTS.get(first, ())
    )


def _names(text: str) -> frozenset[str]:
    """The whitespace-separated names in ``text``."""
    return frozenset(text.split())


def _methods(interfaces: str, methods: str) -> frozenset[str]:
    """Every ``Interface::Method`` pairing of the given interfaces and methods."""
    return frozenset(f"{i}::{m}" for i in interfaces.split() for m in methods.split())


_D3D8_9_DEVICES = "IDirect3DDevice8 IDirect3DDevice9 IDirect3DDevice9Ex"

# apitrace's exact-name table (consulted only when no pattern rule matched),
# grouped by flag combination and family.  It lists exactly these names.
_TABLE_GROUPS: tuple[tuple[CallFlag, frozenset[str]], ...] = (
    # Window-system buffer swaps and Direct3D 8/9 presents
    (
        _F.SWAPBUFFERS,
        _names(
            "eglSwapBuffers eglSwapBuffersWithDamageEXT eglSwapBuffersWithDamageKHR"
            " glXSwapBuffers glXSwapBuffersMscOML"
            " wglSwapBuffers wglSwapLayerBuffers wglSwapMultipleBuffers"
            " IDirect3DDevice9Ex::PresentEx"
        )
        | _methods(_D3D8_9_DEVICES + " IDirect3DSwapChain9 IDirect3DSwapChain9Ex", "Present"),
    ),
    # Frame ends that keep the render target: CGL flush, GREMEDY terminator, D3D9 readback
    (
        _F.END_FRAME,
        _names("CGLFlushDrawable glFrameTerminatorGREMEDY")
        | _methods("IDirect3DDevice9 IDirect3DDevice9Ex", "GetRenderTargetData"),
    ),
    # Direct3D 8/9 render-target switches
    (_F.SWAP_RENDERTARGET, _methods(_D3D8_9_DEVICES, "SetRenderTarget")),
    # Direct3D 2-9 draws and clears (GL, D3D10 and D3D11 draws are pattern rules)
    (
        _F.RENDER,
        _methods(
            _D3D8_9_DEVICES,
            "Clear DrawIndexedPrimitive DrawIndexedPrimitiveUP DrawPrimitive DrawPrimitiveUP"
            " DrawRectPatch DrawTriPatch",
        )
        | _methods(
            "IDirect3DDevice7",
            "Clear DrawIndexedPrimitive DrawIndexedPrimitiveStrided DrawIndexedPrimitiveVB"
            " DrawPrimitive DrawPrimitiveStrided DrawPrimitiveVB",
        )
        | _methods(
            "IDirect3DDevice3",
            "DrawIndexedPrimitive DrawIndexedPrimitiveStrided DrawIndexedPrimitiveVB"
            " DrawPrimitive DrawPrimitiveStrided DrawPrimitiveVB",
        )
        | _methods("IDirect3DDevice2", "DrawIndexedPrimitive DrawPrimitive")
        | _methods("IDirect3DViewport IDirect3DViewport2 IDirect3DViewport3", "Clear")
        | _names("IDirect3DViewport3::Clear2"),
    ),
    # Debug groups and annotations: push, pop, single marker
    (
        _F.MARKER | _F.MARKER_PUSH,
        _names(
            "D3DPERF_BeginEvent ID3DUserDefinedAnnotation::BeginEvent"
            " glPushDebugGroup glPushDebugGroupKHR glPushGroupMarkerEXT"
        ),
    ),
    (
        _F.MARKER | _F.MARKER_POP,
        _names(
            "D3DPERF_EndEvent ID3DUserDefinedAnnotation::EndEvent"
            " glPopDebugGroup glPopDebugGroupKHR glPopGroupMarkerEXT"
        ),
    ),
    (
        _F.MARKER,
        _names("D3DPERF_SetMarker ID3DUserDefinedAnnotation::SetMarker glStringMarkerGREMEDY"),
    ),
    # GL debug messages and event markers, which are also skipped on replay
    (
        _F.MARKER | _F.NO_SIDE_EFFECTS,
        _names(
            "glDebugMessageInsert glDebugMessageInsertAMD glDebugMessageInsertARB"
            " glDebugMessageInsertKHR glInsertEventMarkerEXT"
        ),
    ),
    # Pixel-format and config attribute queries: hidden, yet still replayed
    (
        _F.VERBOSE,
        _names(
            "eglGetConfigAttrib glXGetFBConfigAttrib glXGetFBConfigAttribSGIX"
            " wglGetPixelFormatAttribivARB wglGetPixelFormatAttribivEXT"
        ),
    ),
    # Window-system queries: current context/drawable, proc addresses, extension strings
    (
        _F.NO_SIDE_EFFECTS | _F.VERBOSE,
        _names("""
    CGLGetCurrentContext eglGetProcAddress eglQueryString glXGetClientString glXGetConfig
    glXGetCurrentContext glXGetCurrentDisplay glXGetCurrentDisplayEXT glXGetCurrentDrawable
    glXGetCurrentReadDrawable glXGetCurrentReadDrawableSGI glXGetProcAddress
    glXGetProcAddressARB glXIsDirect glXQueryExtension glXQueryExtensionsString
    glXQueryVersion wglDescribePixelFormat wglGetCurrentContext wglGetCurrentDC
    wglGetDefaultProcAddress wglGetExtensionsStringARB wglGetExtensionsStringEXT
    wglGetPixelFormat wglGetProcAddress
"""),
    ),
    # GL strings and glIs* object/state tests
    (
        _F.NO_SIDE_EFFECTS | _F.VERBOSE,
        _names("""
    glGetString glGetStringi glIsAsyncMarkerSGIX glIsBuffer glIsBufferARB
    glIsBufferResidentNV glIsEnabled glIsEnabledIndexedEXT glIsEnabledi glIsFenceAPPLE
    glIsFenceNV glIsFramebuffer glIsFramebufferEXT glIsList glIsNameAMD
    glIsNamedBufferResidentNV glIsNamedStringARB glIsObjectBufferATI glIsOcclusionQueryNV
    glIsProgram glIsProgramARB glIsProgramNV glIsProgramPipeline glIsQuery glIsQueryARB
    glIsRenderbuffer glIsRenderbufferEXT glIsSampler glIsShader glIsSync glIsTexture
    glIsTextureEXT glIsTransformFeedback glIsTransformFeedbackNV glIsVariantEnabledEXT
    glIsVertexArray glIsVertexArrayAPPLE glIsVertexAttribEnabledAPPLE
"""),
    ),
    # Direct3D capability and format queries
    (
        _F.NO_SIDE_EFFECTS | _F.VERBOSE,
        _methods(
            "IDirect3D8 IDirect3D9 IDirect3D9Ex",
            "CheckDeviceFormat EnumAdapterModes GetAdapterModeCount GetDeviceCaps",
        )
        | _methods(_D3D8_9_DEVICES, "GetDeviceCaps")
        | _names("ID3D11VideoProcessorEnumerator::CheckVideoProcessorFormat"),
    ),
    # Calls without effect on replay: residency tests, debug-output control, labels
    (
        _F.NO_SIDE_EFFECTS,
        _names("""
    eglSetDamageRegionKHR glAreProgramsResidentNV glAreTexturesResident
    glAreTexturesResidentEXT glBufferRegionEnabled glDebugMessageControl
    glDebugMessageControlARB glDebugMessageEnableAMD glObjectLabel glObjectLabelKHR
    glObjectPtrLabel glObjectPtrLabelKHR
"""),
    ),
    # GL queries outside the glGet pattern rule, glGetDoublev and glGetError among them
    (
        _F.NO_SIDE_EFFECTS,
        _names("""
    glGetActiveAtomicCounterBufferiv glGetActiveAttrib glGetActiveAttribARB
    glGetActiveSubroutineName glGetActiveSubroutineUniformName
    glGetActiveSubroutineUniformiv glGetActiveUniform glGetActiveUniformARB
    glGetActiveUniformBlockName glGetActiveUniformBlockiv glGetActiveUniformName
    glGetActiveUniformsiv glGetActiveVaryingNV glGetArrayObjectfvATI glGetArrayObjectivATI
    glGetAttachedObjectsARB glGetAttachedShaders glGetBooleanIndexedvEXT glGetBooleani_v
    glGetBooleanv glGetBufferParameteri64v glGetBufferParameteriv glGetBufferParameterivARB
    glGetBufferParameterui64vNV glGetBufferPointerv glGetBufferPointervARB
    glGetBufferSubData glGetBufferSubDataARB glGetClipPlane glGetColorTable
    glGetColorTableEXT glGetColorTableParameterfv glGetColorTableParameterfvEXT
    glGetColorTableParameterfvSGI glGetColorTableParameteriv glGetColorTableParameterivEXT
    glGetColorTableParameterivSGI glGetColorTableSGI glGetCombinerInputParameterfvNV
    glGetCombinerInputParameterivNV glGetCombinerOutputParameterfvNV
    glGetCombinerOutputParameterivNV glGetCombinerStageParameterfvNV
    glGetConvolutionFilterEXT glGetConvolutionParameterfv glGetConvolutionParameterfvEXT
    glGetConvolutionParameteriv glGetConvolutionParameterivEXT glGetDetailTexFuncSGIS
    glGetDoubleIndexedvEXT glGetDoublei_v glGetDoublev glGetError glGetFenceivNV
    glGetFinalCombinerInputParameterfvNV glGetFinalCombinerInputParameterivNV
    glGetFogFuncSGIS glGetFragDataIndex glGetFragmentLightfvSGIX glGetFragmentLightivSGIX
    glGetFragmentMaterialfvSGIX glGetFragmentMaterialivSGIX
    glGetFramebufferAttachmentParameteriv glGetFramebufferAttachmentParameterivEXT
    glGetFramebufferParameteriv glGetFramebufferParameterivEXT glGetGraphicsResetStatusARB
    glGetHandleARB glGetHistogramEXT glGetHistogramParameterfv glGetHistogramParameterfvEXT
    glGetHistogramParameteriv glGetHistogramParameterivEXT glGetImageTransformParameterfvHP
    glGetImageTransformParameterivHP glGetInfoLogARB glGetInstrumentsSGIX
    glGetInternalformati64v glGetInternalformativ glGetInvariantBooleanvEXT
    glGetInvariantFloatvEXT glGetInvariantIntegervEXT glGetLightfv glGetLightiv
    glGetListParameterfvSGIX glGetListParameterivSGIX glGetLocalConstantBooleanvEXT
    glGetLocalConstantFloatvEXT glGetLocalConstantIntegervEXT glGetMapAttribParameterfvNV
    glGetMapAttribParameterivNV glGetMapControlPointsNV glGetMapParameterfvNV
    glGetMapParameterivNV glGetMapdv glGetMapfv glGetMapiv glGetMaterialfv glGetMaterialiv
    glGetMinmaxEXT glGetMinmaxParameterfv glGetMinmaxParameterfvEXT glGetMinmaxParameteriv
    glGetMinmaxParameterivEXT glGetMultiTexEnvfvEXT glGetMultiTexEnvivEXT
    glGetMultiTexGendvEXT glGetMultiTexGenfvEXT glGetMultiTexGenivEXT
    glGetMultiTexLevelParameterfvEXT glGetMultiTexLevelParameterivEXT
    glGetMultiTexParameterIivEXT glGetMultiTexParameterIuivEXT glGetMultiTexParameterfvEXT
    glGetMultiTexParameterivEXT glGetMultisamplefv glGetMultisamplefvNV
    glGetNamedBufferParameterivEXT glGetNamedBufferParameterui64vNV
    glGetNamedBufferPointervEXT glGetNamedBufferSubDataEXT
    glGetNamedFramebufferAttachmentParameterivEXT glGetNamedFramebufferParameterivEXT
    glGetNamedProgramLocalParameterIivEXT glGetNamedProgramLocalParameterIuivEXT
    glGetNamedProgramLocalParameterdvEXT glGetNamedProgramLocalParameterfvEXT
    glGetNamedProgramStringEXT glGetNamedProgramivEXT glGetNamedRenderbufferParameterivEXT
    glGetNamedStringARB glGetNamedStringivARB glGetObjectBufferfvATI glGetObjectBufferivATI
    glGetObjectLabel glGetObjectParameterfvARB glGetObjectParameterivAPPLE
    glGetObjectParameterivARB glGetObjectPtrLabel glGetOcclusionQueryivNV
    glGetOcclusionQueryuivNV glGetPerfMonitorCounterDataAMD glGetPerfMonitorCounterInfoAMD
    glGetPerfMonitorCounterStringAMD glGetPerfMonitorCountersAMD
    glGetPerfMonitorGroupStringAMD glGetPerfMonitorGroupsAMD glGetPixelTexGenParameterfvSGIS
    glGetPixelTexGenParameterivSGIS glGetPointerIndexedvEXT glGetPointerv glGetPointervEXT
    glGetProgramBinary glGetProgramEnvParameterIivNV glGetProgramEnvParameterIuivNV
    glGetProgramEnvParameterdvARB glGetProgramEnvParameterfvARB glGetProgramInfoLog
    glGetProgramInterfaceiv glGetProgramLocalParameterIivNV glGetProgramLocalParameterIuivNV
    glGetProgramLocalParameterdvARB glGetProgramLocalParameterfvARB
    glGetProgramNamedParameterdvNV glGetProgramNamedParameterfvNV glGetProgramParameterdvNV
    glGetProgramParameterfvNV glGetProgramPipelineInfoLog glGetProgramPipelineiv
    glGetProgramResourceIndex glGetProgramResourceLocation glGetProgramResourceLocationIndex
    glGetProgramResourceName glGetProgramResourceiv glGetProgramStageiv
    glGetProgramStringARB glGetProgramStringNV glGetProgramSubroutineParameteruivNV
    glGetProgramiv glGetProgramivARB glGetProgramivNV glGetQueryIndexediv glGetQueryiv
    glGetQueryivARB glGetRenderbufferParameteriv glGetRenderbufferParameterivEXT
    glGetSamplerParameterIiv glGetSamplerParameterIuiv glGetSamplerParameterfv
    glGetSamplerParameteriv glGetSeparableFilterEXT glGetShaderInfoLog
    glGetShaderPrecisionFormat glGetShaderSource glGetShaderSourceARB glGetShaderiv
    glGetSharpenTexFuncSGIS glGetSynciv glGetTexBumpParameterfvATI
    glGetTexBumpParameterivATI glGetTexEnvfv glGetTexEnviv glGetTexFilterFuncSGIS
    glGetTexGendv glGetTexGenfv glGetTexGeniv glGetTrackMatrixivNV
    glGetTransformFeedbackVarying glGetTransformFeedbackVaryingEXT
    glGetTransformFeedbackVaryingNV glGetUniformIndices glGetUniformSubroutineuiv
    glGetUniformdv glGetUniformfv glGetUniformfvARB glGetUniformi64vNV glGetUniformiv
    glGetUniformivARB glGetUniformui64vNV glGetUniformuiv glGetUniformuivEXT
    glGetVariantArrayObjectfvATI glGetVariantArrayObjectivATI glGetVariantBooleanvEXT
    glGetVariantFloatvEXT glGetVariantIntegervEXT glGetVariantPointervEXT
    glGetVertexArrayIntegeri_vEXT glGetVertexArrayIntegervEXT glGetVertexArrayPointeri_vEXT
    glGetVertexArrayPointervEXT glGetVideoCaptureStreamdvNV glGetVideoCaptureStreamfvNV
    glGetVideoCaptureStreamivNV glGetVideoCaptureivNV glGetVideoi64vNV glGetVideoivNV
    glGetVideoui64vNV glGetVideouivNV glGetnMapdvARB glGetnMapfvARB glGetnMapivARB
    glGetnUniformdvARB glGetnUniformfvARB glGetnUniformivARB glGetnUniformuivARB
"""),
    ),
)

_TABLE: dict[str, CallFlag] = {name: flags for flags, names in _TABLE_GROUPS for name in names}


@functools.lru_cache(maxsize=4096)
def call_flags(name: str) -> CallFlag:
    """Flags apitrace's parser gives every call of the function ``name``.

    Same result as apitrace's ``Parser::lookupCallFlags``.  Per-call adjustments
    (see ``adjust_flags``) and the FAKE/INCOMPLETE flags are not included.
    """
    for pattern, flags in _rules(name[:1]):
        if pattern.fullmatch(name):
            return flags
    return _TABLE.get(name, CallFlag.NONE)


def adjust_flags(name: str, flags: CallFlag, ret: int | None, *, num_args: int = 0) -> CallFlag:
    """``flags`` plus the per-call adjustment apitrace's parser makes once a call is read.

    ``call_flags("glGetError")`` is NO_SIDE_EFFECTS; apitrace additionally marks a
    ``glGetError`` that returned 0 (GL_NO_ERROR) as VERBOSE, so that an application's
    error checks are hidden unless they report an error.  It does so only for a
    ``glGetError`` signature with no arguments.
    ``ret`` is the call's return value as an integer (a null value counts as 0), or
    None when the call recorded none; ``num_args`` is the signature's argument count.
    """
    if name == "glGetError" and num_args == 0 and ret == 0:
        return flags | CallFlag.VERBOSE
    return flags


# What glretrace's generated code (retrace/glretrace.py, ``profileDraw``) profiles
# as a draw call: its draw-arrays and draw-elements patterns, which unlike the
# RENDER rule above do not admit Draw*Mesh* (glDrawMeshArraysSUN), plus the same
# misc-draw pattern as RENDER.  That pattern includes glEnd: glretrace starts the
# draw query at glBegin and ends it at glEnd, so both count as profiled draws.
# glBegin and glDispatchCompute* are profiled draws without being RENDER.  Missed by
# the patterns, so neither draws nor RENDER: glBlitNamedFramebuffer, glClearBuffer*,
# gl*DrawMeshTasks*EXT and the gl*Draw*ElementArray{APPLE,ATI} element-array draws.
_PROFILED_DRAW = re.compile(
    r"gl(?:[A-Z][a-z]+)*Draw(?:Range)?(?:Arrays|Elements)(?:[A-Z][a-zA-Z]*)?|" + _GL_MISC_DRAW,
    re.ASCII,
)


@functools.lru_cache(maxsize=4096)
def is_profiled_draw(name: str) -> bool:
    """Whether glretrace's profiler times calls to ``name`` as draw calls."""
    return (
        name == "glBegin"
        or name.startswith("glDispatchCompute")
        or _PROFILED_DRAW.fullmatch(name) is not None
    )
