"""Config semantics: does the candidate's config class consume the official config.json?

- ``table``: the semantics table of a contract (official key -> candidate attribute(s)).
- ``official``: reading the official config.json strictly, against its sha256 pin.
- ``probe`` / ``worker``: loading it with the candidate class in a subprocess.
- ``reads``: where the candidate's source tree reads each attribute (static analysis).
- ``envfiles``: the env.json of each side against the pins.
- ``check``: the per-key rows and the criteria.
"""
