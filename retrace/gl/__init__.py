"""OpenGL-side knowledge of the replayer: the API model that call dispatch is built from."""
