"""Tests of metrics/: against scikit-learn and hand computations."""
