"""Tests compared against apitrace, glretrace or eglretrace, the reference tools."""
