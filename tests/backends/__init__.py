"""Tests of backends/: a Ray cluster scores exactly what a run in process scores, into the same store."""
