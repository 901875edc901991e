"""The shared kernel: atomic writes, errors, exit codes, paths, validation, hashing, git,
echo, progress, resources, content ids and the run protocol. It imports nothing of gates
above it."""
