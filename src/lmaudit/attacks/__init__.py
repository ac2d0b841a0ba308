"""Attacks: turn signals into membership scores (higher = more likely a member) and thresholds."""
