"""Software models of GL_AMD_performance_monitor and GL_INTEL_performance_query, for tests only.

Neither extension exists on llvmpipe (nor on most CI machines), so the vendor
backends are tested against these models of the Khronos specifications. A
model stands where the driver's implementation would be: its entry points are
C callbacks with the registry's prototypes, handed out by a proc-address
function that wraps the real driver's, so the backend resolves, types and calls
them through `Dispatch.raw` exactly as on hardware. What each model implements
of its spec, and where it follows Mesa because the spec says nothing, is in
its module's docstring; `driver` holds what they share.
"""
