"""Attacks: stored signals in, membership scores out (higher = more likely a member); one module per attack, listed in registry.py."""
