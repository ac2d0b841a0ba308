"""Corpus loading and validation, roles and splits, synthetic corpora."""
