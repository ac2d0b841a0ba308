"""Per-sample signals, one module per signal (listed in registry.py; shared pieces in base.py), and the on-disk store."""
