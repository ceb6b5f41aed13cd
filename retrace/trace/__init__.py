"""Reading apitrace .trace files: containers, grammar, call flags, callsets, dump."""
