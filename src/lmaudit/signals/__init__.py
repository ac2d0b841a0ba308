"""Per-sample signals: MLM energy and pseudo-likelihood, and the on-disk signal store."""
