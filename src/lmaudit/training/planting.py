"""Canaries for the user's own training data and model: the rows to add (plain text, prompt-completion or chat
messages, the secret where a completion-only or assistant-only loss reads it). Three kinds of design: in-vocabulary
random secrets (`secret`, Carlini et al.'s; `words`), which any recipe learns as it is (LoRA on any modules, embeddings
frozen); held-out real samples (`sample`), learned as they are too, whose trained span is the text after its first
word (that word is the prompt of prompt-completion and chat rows); and new-token ones, for which the tokens are
reserved and a collator trains each canary row on its secret alone (as `lmaudit train --canaries` does)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lmaudit.canaries.make import CANARIES_FILE, planted_canaries, read_canary_set, reserved_tokens
from lmaudit.canaries.settings import SECRET_DESIGNS
from lmaudit.data.corpus import read_table
from lmaudit.errors import InputError
from lmaudit.models.inputs import secret_only_labels
from lmaudit.models.tokenizer import reserve_tokens

FORMATS = {"text": ("text",), "prompt_completion": ("prompt", "completion"), "messages": ("messages",)}


def new_token_folder(folder: str | Path) -> Path:
    """`folder`, checked to hold new-token canaries (the design whose secret tokens the callback can find and check)."""
    kind = read_canary_set(folder).kind
    if kind != "new_token":
        raise InputError(f"{folder}: {kind} canaries; the training callback plants and checks new-token canaries "
                         "(`lmaudit canaries make --design new_token`); train the others with `lmaudit train --canaries`")
    return Path(folder)


def secret_folder(folder: str | Path) -> Path:
    """`folder`, checked to hold canaries with a secret (new-token or in-vocabulary), which `CheckpointAudit` scores
    by their secret alone."""
    kind = read_canary_set(folder).kind
    if kind not in SECRET_DESIGNS:
        raise InputError(f"{folder}: {kind} canaries; CheckpointAudit scores canaries by their secret (`lmaudit "
                         "canaries make --design words`, secret or new_token); audit these after training with "
                         "`lmaudit canaries audit`")
    return Path(folder)


def plantable_folder(folder: str | Path) -> Path:
    """`folder`, checked to hold canaries the training callback can plant and check: a secret design's or held-out
    text samples (`sample`)."""
    kind = read_canary_set(folder).kind
    if kind != "sample" and kind not in SECRET_DESIGNS:
        raise InputError(f"{folder}: {kind} canaries; the training callback plants and checks canaries with a secret "
                         "(`lmaudit canaries make --design secret`, words or new_token) or held-out samples (--design "
                         "sample); train the others with `lmaudit train --canaries`")
    return Path(folder)


def trained_span(sample_id: str, text: str) -> str:
    """A sample canary's span that its rows train and the pre-flight looks for: the text after its first space (the
    first word is the prompt of prompt-completion rows); InputError for a text of one word."""
    if " " not in text.strip():
        raise InputError(f"sample canary '{sample_id}' is one word, too short to plant as a training row; make the "
                         "canaries again from a --source of longer texts")
    return text[text.index(" ", len(text) - len(text.lstrip())) + 1:]


def canary_texts(folder: str | Path) -> list[str]:
    """The texts to add to the training data: each planted canary as often as its tier repeats it."""
    return planted_canaries(plantable_folder(folder))["text"].tolist()


def planted_secrets(folder: str | Path) -> list[str]:
    """Each planted row's secret (a sample's trained span), in `canary_texts`' order."""
    planted = planted_canaries(plantable_folder(folder))
    if read_canary_set(folder).kind == "sample":
        return [trained_span(sample_id, text) for sample_id, text in zip(planted["sample_id"], planted["text"],
                                                                        strict=True)]
    secrets = read_table(Path(folder) / CANARIES_FILE).set_index("sample_id")["secret"]
    ids = planted["sample_id"].str.split(".").str[0]  # a copy's id is canary-0001.2
    return secrets.loc[ids].tolist()


def canary_rows(folder: str | Path, data_format: str = "text") -> list[dict]:
    """The planted canaries as training rows of `data_format` (a key of FORMATS): {"text"}; {"prompt", "completion"}
    with the secret and what follows it as the completion; or {"messages"}, a user turn and the secret in the assistant's
    reply. A completion-only or assistant-only loss then reads the secret and little else, as the canaries are meant to
    be trained."""
    if data_format not in FORMATS:
        raise InputError(f"canary format '{data_format}': the canaries are planted as {', '.join(FORMATS)}; convert "
                         "the dataset to one of them")
    rows = []
    for text, secret in zip(canary_texts(folder), planted_secrets(folder), strict=True):
        cut = text.rindex(secret)
        prompt, completion = text[:cut].rstrip(), text[cut:]
        rows.append({"text": {"text": text},
                     "prompt_completion": {"prompt": prompt, "completion": " " + completion},
                     "messages": {"messages": [{"role": "user", "content": prompt},
                                               {"role": "assistant", "content": completion}]}}[data_format])
    return rows


def dataset_format(columns: list[str], name: str = "the dataset") -> str:
    """The format of a training set with these columns: 'messages', 'prompt_completion' or 'text' (TRL's names)."""
    for data_format, needed in sorted(FORMATS.items(), key=lambda item: -len(item[1])):
        if set(needed) <= set(columns):
            return data_format
    raise InputError(f"{name} has columns {', '.join(columns) or 'none'}: the canaries can be placed only in a 'text', "
                     "'prompt' and 'completion', or 'messages' column; plant them in the text before tokenizing it")


def plant_canaries(dataset, folder: str | Path):
    """`dataset` (a list of dicts, or a Hugging Face `datasets.Dataset`) with `folder`'s planted canaries appended as
    rows of its own format; its other columns are None in the canary rows."""
    is_table = hasattr(dataset, "column_names")
    columns = list(dataset.column_names) if is_table else sorted({key for row in dataset for key in row})
    added = [{**dict.fromkeys(columns), **row} for row in canary_rows(folder, dataset_format(columns))]
    if not is_table:
        return [*dataset, *added]
    from datasets import Dataset, concatenate_datasets

    return concatenate_datasets([dataset, Dataset.from_list(added, features=dataset.features)])


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
