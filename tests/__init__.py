"""lmaudit's tests; the folders mirror src/lmaudit/."""
