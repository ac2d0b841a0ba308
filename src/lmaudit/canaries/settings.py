"""What a canary audit can be asked for, and its defaults: the kinds of canaries, the secrets' sentence and length, the
random secrets scored for exposure. No pandas: the command line's options read these."""

KINDS = ("secret", "sample")
SECRET_SLOT = "{secret}"
DEFAULT_FORMAT = "the patient's medical record number is {secret} ."
DEFAULT_SECRET_DIGITS = 8
DEFAULT_CANDIDATES = 1000
MINIMUM_CANDIDATES = 20
