"""Metrics over membership scores: ROC, AUC, TPR at low FPR, threshold metrics, uncertainty."""
