"""The documents the checkers write, one pydantic model per kind, each beside its JSON Schema
(`receipts/schemas/<kind>.schema.json`; tests/test_output_models.py keeps the two in
agreement). The checkers validate what they write with these models, and the contracts and the
status command read the outputs through them, never as loose dictionaries."""
