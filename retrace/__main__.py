"""`python -m retrace` runs the command-line interface."""

from retrace.cli import command_line

command_line()
