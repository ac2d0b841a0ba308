"""Corpus and scores-file loading and validation, role names and invariants, seeded splits, synthetic corpora."""
