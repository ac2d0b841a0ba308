"""Tests of models/: training, DP-SGD, classifiers."""
