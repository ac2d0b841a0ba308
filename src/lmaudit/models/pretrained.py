"""Start training from a pretrained checkpoint instead of from scratch, fully or with LoRA adapters (peft).

Most users fine-tune: a local folder or a hub id already in the local Hugging Face cache, its own tokenizer, safetensors
weights only, no network. With LoRA only the adapters train (and only they are clipped and noised under DP-SGD); the
output folder then holds the adapter, which `--adapter` applies to the same base at audit time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from lmaudit.errors import InputError
from lmaudit.models import quiet_peft, quiet_transformers
from lmaudit.models.fingerprints import model_fingerprint
from lmaudit.models.folders import check_model_folder, resolve_model_folder
from lmaudit.models.recipe import LoraSettings
from lmaudit.models.tokenizer import load_tokenizer


@dataclass
class Checkpoint:
    """A pretrained model ready to train, its tokenizer, what the training summary records about where it began, and
    the modules the checkpoint had no weights for (a new classification head, BERT's pooler), newly initialised."""

    model: torch.nn.Module
    tokenizer: object
    record: dict
    new_modules: list[str]


AUTO_CLASSES = {"mlm": "AutoModelForMaskedLM", "clm": "AutoModelForCausalLM", "classifier": "AutoModelForSequenceClassification"}


def load_checkpoint(init_from: str | Path, kind: str, labels: list[str] | None = None) -> Checkpoint:
    """The checkpoint `init_from` as a `kind` model in fp32 training mode (a classifier gets a new head for `labels`), its
    tokenizer (given a padding token when it has none: the end-of-text token, as is usual for causal LMs)."""
    import transformers

    quiet_transformers()
    folder = resolve_model_folder(init_from)
    check_model_folder(folder)
    options = {}
    if kind == "classifier":
        options = {"num_labels": len(labels), "id2label": dict(enumerate(labels)),
                   "label2id": {name: index for index, name in enumerate(labels)}, "ignore_mismatched_sizes": True}
    try:
        model, loading = getattr(transformers, AUTO_CLASSES[kind]).from_pretrained(
            folder, local_files_only=True, use_safetensors=True, dtype=torch.float32, output_loading_info=True, **options)
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}: cannot start a {kind} from this checkpoint ({str(err).splitlines()[0]})") from None
    tokenizer = load_tokenizer(folder)
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise InputError(f"{folder}: the tokenizer has neither a padding nor an end-of-text token to pad batches with")
        tokenizer.pad_token = tokenizer.eos_token
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    new_modules = sorted({key.rsplit(".", 1)[0] for key in [*loading["missing_keys"], *loading["mismatched_keys"]]
                          if isinstance(key, str)})
    return Checkpoint(model.train(), tokenizer, {"init_from": str(init_from), "init_fingerprint": model_fingerprint(folder)},
                      new_modules)


def with_lora(checkpoint: Checkpoint, kind: str, settings: LoraSettings) -> torch.nn.Module:
    """The checkpoint's model with LoRA adapters on every linear layer of its blocks. Only the adapters train, and the
    modules the checkpoint lacked (newly initialised) train whole and are saved with the adapter: left out, they would
    be initialised anew, differently, each time the adapter is loaded."""
    from peft import LoraConfig, TaskType, get_peft_model

    task = {"clm": TaskType.CAUSAL_LM, "classifier": TaskType.SEQ_CLS}.get(kind)
    new = checkpoint.new_modules or None
    # GPT-2 keeps its linear layers as Conv1D, weights stored transposed: peft must be told, or it warns and corrects
    transposed = any(type(module).__name__ == "Conv1D" for module in checkpoint.model.modules())
    config = LoraConfig(r=settings.rank, lora_alpha=settings.alpha or 2 * settings.rank, lora_dropout=settings.dropout,
                        target_modules="all-linear", task_type=task, modules_to_save=new, exclude_modules=new,
                        fan_in_fan_out=transposed)
    with quiet_peft():
        return get_peft_model(checkpoint.model, config)
