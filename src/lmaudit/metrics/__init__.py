"""Metrics over membership scores (no torch): ROC, AUC, TPR at low FPR, threshold metrics, uncertainty, typed results."""
