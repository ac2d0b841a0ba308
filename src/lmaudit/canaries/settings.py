"""What a canary audit can be asked for, and its defaults: the kinds of canaries, the secrets' sentence and length, the
random secrets scored for exposure. No pandas: the command line's options read these."""

from dataclasses import dataclass

KINDS = ("new_token", "words", "secret", "sample", "mislabelled")  # the designs; the first, the default, detects best
SECRET_DESIGNS = ("new_token", "words", "secret")  # each canary holds a secret, scored alone
SOURCE_DESIGNS = ("sample", "mislabelled")  # drawn from held-out samples (--source)
SECRET_SLOT = "{secret}"
DEFAULT_FORMAT = "the patient's medical record number is {secret} ."
DEFAULT_SECRET_DIGITS = 8
DEFAULT_NEW_TOKENS = 1  # per new-token secret, as Panda et al.'s default (mask_len 1)
DEFAULT_SECRET_WORDS = 16  # per words secret: memaudit's are 32 tokens, most of these words one token or two
NEW_TOKEN_PREFIX = "xq"  # a new token is this and 10 hex digits: a word no text holds
DEFAULT_CANDIDATES = 1000
MINIMUM_CANDIDATES = 20


@dataclass(frozen=True)
class SecretShape:
    """How each secret is made: the sentence it sits in (`format`, with SECRET_SLOT where the secret goes), and its
    length by design: `digits` (secret), new `tokens` (new_token), `words` drawn from the tokenizer of the model folder
    `vocabulary` (words)."""

    format: str = DEFAULT_FORMAT
    digits: int = DEFAULT_SECRET_DIGITS
    tokens: int = DEFAULT_NEW_TOKENS
    words: int = DEFAULT_SECRET_WORDS
    vocabulary: str | None = None
