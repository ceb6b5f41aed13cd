"""Build hook for the C scanner; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "retrace.trace._scanner",
            sources=["retrace/trace/_scanner.c"],
            extra_compile_args=["-O2", "-std=c99"],
        )
    ]
)
