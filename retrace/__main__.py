"""`python -m retrace` runs the command-line interface."""

from retrace.launch import command_line

command_line()
