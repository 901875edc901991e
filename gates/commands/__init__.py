"""One module per command; each exposes plain functions that return an exit code."""
