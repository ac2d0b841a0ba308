"""Canary audits: make canaries, plant them in training, and bound epsilon from one run (and measure exposure)."""
