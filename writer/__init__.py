"""Result store and writers (installed as retrace.writer)."""
