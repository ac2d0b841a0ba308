"""New-token canaries for the user's own training data and model: the texts to add, the tokens to reserve, and the
collator that trains each canary row on its secret alone (as `lmaudit train --canaries` does)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lmaudit.canaries.make import planted_canaries, read_canary_set, reserved_tokens
from lmaudit.errors import InputError
from lmaudit.models.inputs import secret_only_labels
from lmaudit.models.tokenizer import reserve_tokens


def new_token_folder(folder: str | Path) -> Path:
    """`folder`, checked to hold new-token canaries (the design whose secret tokens the callback can find and check)."""
    kind = read_canary_set(folder).kind
    if kind != "new_token":
        raise InputError(f"{folder}: {kind} canaries; the training callback plants and checks new-token canaries "
                         "(`lmaudit canaries make --design new_token`); train the others with `lmaudit train --canaries`")
    return Path(folder)


def canary_texts(folder: str | Path) -> list[str]:
    """The texts to add to the training data: each planted canary as often as the folder's design repeats it."""
    planted = planted_canaries(new_token_folder(folder))
    return planted["text"].tolist()


def add_canary_tokens(model, tokenizer, folder: str | Path) -> list[int]:
    """Reserve every canary's new tokens in `tokenizer` (planted or not, so the vocabulary does not tell which were)
    and grow `model`'s embeddings to match; the secret tokens' ids."""
    tokens = reserved_tokens(new_token_folder(folder))
    reserve_tokens(tokenizer, tokens)
    model.resize_token_embeddings(len(tokenizer))
    return tokenizer.convert_tokens_to_ids(list(tokens))


def secret_only(collator: Callable[[list], dict], secret_ids: list[int], mask_token_id: int | None = None) -> Callable:
    """`collator`, with each row that holds a secret token learning those tokens alone (a masked LM's:
    `mask_token_id`): a canary's whole gradient goes to its secret, as Panda et al. train them."""
    import torch

    secrets = torch.tensor(secret_ids)

    def collate(rows: list) -> dict:
        return secret_only_labels(collator(rows), secrets, mask_token_id)

    return collate
