"""The trainer API: run and tensor recorders, env capture, checks right after a save."""
