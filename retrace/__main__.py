"""`python -m retrace` runs the `retrace` program."""

from retrace.main import command_line

command_line()
