"""Contracts: declarative TOML files, each judged by one built-in evaluator."""
