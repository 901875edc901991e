"""Checkers: pure comparisons whose outputs become `*_check` artifacts with receipts."""
