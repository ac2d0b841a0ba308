"""Loading and training of the models an audit needs."""

import warnings
from contextlib import contextmanager

# No model hub is reached at run time (an audit must not leak what it audits, nor depend on the network): every load
# passes local_files_only=True. Nothing here changes os.environ, so a script that imports lmaudit keeps its own hub
# settings for what it loads itself.


def quiet_transformers() -> None:
    """Turn off transformers' own progress bars (weight loading, shard writing) and its info logs."""
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()


@contextmanager
def quiet_peft():
    """Silence peft's question to transformers about a deprecated attribute: nothing for the user to act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield
