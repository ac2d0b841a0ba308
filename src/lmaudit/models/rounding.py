"""Round-to-nearest weight quantization in process, on any device: what a model loses when it is served in 8 or 4
bits, without bitsandbytes or a GPU. Each weight matrix of a linear layer (the output head excepted, as bitsandbytes
leaves it) is rounded per output row in groups of input weights, symmetrically to the group's largest magnitude, and
kept as the rounded values in the weights' dtype: the numbers a round-to-nearest kernel computes with."""

from __future__ import annotations

# Bits of each round-to-nearest quantization and its group of input weights per scale (None: the whole row, as
# LLM.int8's vector-wise scales; 64, as bitsandbytes' 4-bit blocks).
ROUNDING = {"rtn8": (8, None), "rtn4": (4, 64)}


def round_rows(weight, bits: int, group: int | None):
    """`weight` (output rows x inputs) rounded to `bits`-bit integers per row and group of `group` inputs (None: the
    row), each group scaled by its largest magnitude / (2^(bits-1) - 1); the result in the weight's dtype."""
    import torch

    rows, inputs = weight.shape
    size = inputs if group is None else group
    padded = -inputs % size
    grouped = torch.nn.functional.pad(weight.float(), (0, padded)).reshape(rows, -1, size)
    levels = 2 ** (bits - 1) - 1
    scale = grouped.abs().amax(dim=-1, keepdim=True).clamp(min=torch.finfo(torch.float32).tiny) / levels
    rounded = (torch.round(grouped / scale).clamp(-levels, levels) * scale).reshape(rows, -1)[:, :inputs]
    return rounded.to(weight.dtype)


def round_weights(network, quantization: str) -> int:
    """Round every linear layer's weights of `network` in place (`ROUNDING[quantization]`); the output head and the
    embeddings are kept. Returns the number of matrices rounded."""
    import torch
    from transformers.pytorch_utils import Conv1D

    bits, group = ROUNDING[quantization]
    head = network.get_output_embeddings()
    rounded = 0
    with torch.no_grad():
        for module in network.modules():
            if module is head or not isinstance(module, torch.nn.Linear | Conv1D):
                continue
            # Conv1D (GPT-2) keeps its weight as inputs x outputs: its output rows are the columns.
            transposed = isinstance(module, Conv1D)
            weight = module.weight.T if transposed else module.weight
            new = round_rows(weight, bits, group)
            module.weight.copy_(new.T if transposed else new)
            rounded += 1
    return rounded
