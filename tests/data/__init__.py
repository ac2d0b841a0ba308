"""Tests of data/: corpus loading, roles, synthetic corpora."""
