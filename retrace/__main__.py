"""`python -m retrace` runs the command-line interface."""

from retrace.cli import main

main()
