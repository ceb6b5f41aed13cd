"""retrace: replay apitrace OpenGL traces and profile them."""
