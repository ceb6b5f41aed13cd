"""Software models of drivers, for tests only: GL_AMD_performance_monitor and
GL_INTEL_performance_query, and NVIDIA's EGL driver.

Neither extension exists on llvmpipe (nor on most CI machines), so the vendor
backends are tested against these models of the Khronos specifications. A
model stands where the driver's implementation would be: its entry points are
C callbacks with the registry's prototypes, handed out by a proc-address
function that wraps the real driver's, so the backend resolves, types and calls
them through `Dispatch.raw` exactly as on hardware. What each model implements
of its spec, and where it follows Mesa because the spec says nothing, is in
its module's docstring; `driver` holds what they share.

NVIDIA's driver is modelled a level lower, for whole processes: `nvidia` builds
a libglvnd EGL vendor library (nvidia_egl.c) that wraps Mesa's and behaves as
NVIDIA's was measured to where the two differ (contexts refused in a forked
child of the process that initialised the display; draw and read buffers fixed
at a context's first make-current); a process started with `nvidia.environment`
replays on it. `nvidia_probe` holds small EGL programs that show each behaviour.
"""
