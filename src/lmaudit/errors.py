"""The one exception type that the CLI turns into a one-line message and exit status 2."""


class InputError(Exception):
    """Bad user input: the message names the file, row or field and says what to do."""
