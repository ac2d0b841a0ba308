"""Tests of attacks/: every attack on synthetic stored signals, no model."""
