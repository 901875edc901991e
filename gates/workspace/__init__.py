"""The workspace stage: the git repository with its gates.toml, and the external roots it
names."""
