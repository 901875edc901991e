"""Receipts: artifact files bound by digest to provenance and an evidence stamp."""
