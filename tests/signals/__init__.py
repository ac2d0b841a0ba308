"""Tests of signals/: each signal against a slow, obviously right reference; the store; the registry."""
