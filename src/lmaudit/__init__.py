"""lmaudit: membership inference audits of language models."""

__version__ = "0.1.0"
