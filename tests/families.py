"""Tiny random models of every architecture family lmaudit supports (2 layers, hidden 32), built from configs with no
network: the causal LMs users fine-tune (GPT-2, Pythia/GPT-NeoX, Llama, Mistral, Qwen2, Phi, OPT), the masked LMs
(BERT, RoBERTa, DistilBERT, ALBERT, DeBERTa-v2, ModernBERT) and sequence classifiers of each."""

from __future__ import annotations

from pathlib import Path

CAUSAL_FAMILIES = ("gpt2", "gpt_neox", "llama", "mistral", "qwen2", "phi", "opt")
MASKED_FAMILIES = ("bert", "roberta", "distilbert", "albert", "deberta_v2", "modernbert")
# transformers class name prefix of each family
CLASS_PREFIX = {
    "gpt2": "GPT2", "gpt_neox": "GPTNeoX", "llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "phi": "Phi",
    "opt": "OPT", "bert": "Bert", "roberta": "Roberta", "distilbert": "DistilBert", "albert": "Albert",
    "deberta_v2": "DebertaV2", "modernbert": "ModernBert",
}
HEAD_SUFFIX = {"clm": "ForCausalLM", "mlm": "ForMaskedLM", "classifier": "ForSequenceClassification"}


def family_config(family: str, tokenizer, num_labels: int = 2):
    """A 2-layer, hidden-32 config of `family` for `tokenizer` (its padding, begin and end tokens)."""
    import transformers

    special = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id, "num_labels": num_labels,
               "bos_token_id": tokenizer.cls_token_id, "eos_token_id": tokenizer.sep_token_id}
    size = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
            "max_position_embeddings": 64}
    config_class = getattr(transformers, f"{CLASS_PREFIX[family]}Config")
    if family == "gpt2":
        return config_class(n_embd=32, n_layer=2, n_head=2, n_positions=64, **special)
    if family == "opt":
        return config_class(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, ffn_dim=64, word_embed_proj_dim=32,
                            max_position_embeddings=64, **special)
    if family == "distilbert":
        return config_class(dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64, **special)
    if family == "roberta":  # positions start after the padding index
        return config_class(**{**size, "max_position_embeddings": 64 + tokenizer.pad_token_id + 1}, **special)
    if family == "albert":
        return config_class(embedding_size=16, **size, **special)
    if family in ("llama", "mistral", "qwen2"):  # grouped-query attention, as the released models have
        return config_class(num_key_value_heads=1, **size, **special)
    if family == "modernbert":
        return config_class(cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id, **size, **special)
    return config_class(**size, **special)


def tiny_family_model(family: str, kind: str, tokenizer, seed: int = 0):
    """A random `kind` ('clm', 'mlm' or 'classifier') model of `family`, in eval mode."""
    import torch
    import transformers

    torch.manual_seed(seed)
    name = "GPT2LMHeadModel" if (family, kind) == ("gpt2", "clm") else CLASS_PREFIX[family] + HEAD_SUFFIX[kind]
    model_class = getattr(transformers, name)
    return model_class(family_config(family, tokenizer)).eval()


def save_family_model(family: str, kind: str, tokenizer, folder: Path, seed: int = 0) -> Path:
    """Save a tiny random model of `family` with `tokenizer` into `folder` (safetensors)."""
    model = tiny_family_model(family, kind, tokenizer, seed)
    if kind == "classifier":
        model.config.id2label = {0: "a", 1: "b"}
        model.config.label2id = {"a": 0, "b": 1}
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
