"""`retrace trim`: a few frames of a trace, with the setup they need, as a trace of their own."""
