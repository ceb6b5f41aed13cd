"""`retrace report`: profiles as one self-contained HTML page of plots and tables."""
