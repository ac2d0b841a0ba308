"""What a canary audit can be asked for, and its defaults: the kinds of canaries, the secrets' sentence and length, the
random secrets scored for exposure. No pandas: the command line's options read these."""

KINDS = ("new_token", "secret", "sample", "mislabelled")  # the designs, the one that detects best first
SECRET_DESIGNS = ("new_token", "secret")  # each canary holds a secret, scored alone
SOURCE_DESIGNS = ("sample", "mislabelled")  # drawn from held-out samples (--source)
SECRET_SLOT = "{secret}"
DEFAULT_FORMAT = "the patient's medical record number is {secret} ."
DEFAULT_SECRET_DIGITS = 8
DEFAULT_NEW_TOKENS = 1  # per new-token secret, as Panda et al.'s default (mask_len 1)
NEW_TOKEN_PREFIX = "xq"  # a new token is this and 10 hex digits: a word no text holds
DEFAULT_CANDIDATES = 1000
MINIMUM_CANDIDATES = 20
