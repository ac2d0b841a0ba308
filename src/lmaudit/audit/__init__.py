"""Auditing a model: the corpus, each audit path's signals (language model, classifier, white-box), the attacks, and the
output folder, run in order by `run.py`."""
