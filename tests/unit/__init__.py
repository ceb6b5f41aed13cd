"""Tests that need no GL at all: no driver, no context, no reference tool."""
