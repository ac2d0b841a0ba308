"""Per-sample squared gradient norms of every parameter tensor from one batched backward pass.

Samples in a batch do not interact (eval mode; attention stays within a sample), so the gradient
of the summed loss at each layer's output holds every sample's own output gradient. From a
layer's input X (T x in) and output gradient G (T x out) of one sample, the sample's weight
gradient is G^T X, and its squared norm is either summed directly or, when cheaper, taken as
sum((X X^T) * (G G^T)) without forming the gradient (Goodfellow's trick, as in "ghost" clipping).
Embeddings use the same identity with one-hot rows ("same token" in place of X X^T). A tensor used
by two layers (tied input and output embeddings) gets the squared norm of its summed gradient from
the same identity applied to every pair of uses. Layer norms and biases are small enough to form
directly. Weight gradients themselves are never computed: autograd is asked only for the
gradients at the layers' outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.pytorch_utils import Conv1D

SUPPORTED_LAYERS = (torch.nn.Linear, Conv1D, torch.nn.Embedding, torch.nn.LayerNorm)


class UnsupportedLayer(TypeError):
    """The model has a parameterised layer whose per-sample gradient norm this module cannot compute."""


@dataclass
class _Call:
    layer: torch.nn.Module
    inputs: torch.Tensor
    output: torch.Tensor


def _flat(tensor: torch.Tensor) -> torch.Tensor:
    """(B, ..., d) -> (B, positions, d)."""
    return tensor.reshape(tensor.shape[0], -1, tensor.shape[-1])


@dataclass
class _Outer:
    """A per-sample weight gradient written as sum_t rows_t (outer) cols_t, without forming it.

    rows: (B, T, n) dense, or (B, T) token indices standing for one-hot rows (embeddings).
    """

    rows: torch.Tensor
    cols: torch.Tensor

    @property
    def indexed(self) -> bool:
        return self.rows.dim() == 2


def _outer_form(call: _Call, grad_output: torch.Tensor) -> _Outer:
    """The layer's per-sample weight gradient in outer-product form (row space = the weight's first axis)."""
    layer, g = call.layer, _flat(grad_output).double()
    if isinstance(layer, torch.nn.Embedding):
        ids = call.inputs.reshape(call.inputs.shape[0], -1)
        if layer.padding_idx is not None:  # the padding row never receives a gradient
            g = g * (ids != layer.padding_idx)[..., None]
        return _Outer(ids, g)
    x = _flat(call.inputs).double()
    return _Outer(x, g) if isinstance(layer, Conv1D) else _Outer(g, x)  # Conv1D weight is (in, out), Linear (out, in)


def _row_products(a: _Outer, b: _Outer) -> torch.Tensor:
    """(B, Ta, Tb): rows_t . rows_s, where index rows are one-hot."""
    if a.indexed and b.indexed:
        return (a.rows[:, :, None] == b.rows[:, None, :]).double()
    if a.indexed:
        return _row_products(b, a).transpose(1, 2)
    if b.indexed:  # dense_t . onehot(i_s) = dense_t[i_s]
        return a.rows.gather(2, b.rows[:, None, :].expand(-1, a.rows.shape[1], -1))
    return torch.bmm(a.rows, b.rows.transpose(1, 2))


def _inner(a: _Outer, b: _Outer) -> torch.Tensor:
    """Per-sample <sum_t a_t, sum_s b_s> of two outer-product forms: sum_{t,s} (rows . rows)(cols . cols)."""
    return (_row_products(a, b) * torch.bmm(a.cols, b.cols.transpose(1, 2))).sum((1, 2))


def _formed(form: _Outer) -> torch.Tensor:
    """The per-sample gradient of a dense form itself, (B, n_rows, n_cols)."""
    return torch.einsum("btr,btc->brc", form.rows, form.cols)


def _weight_squared_norm(form: _Outer) -> torch.Tensor:
    """Per-sample squared norm of one outer-product form: directly when forming the gradient is cheaper."""
    if not form.indexed:
        positions, n_rows, n_cols = form.rows.shape[1], form.rows.shape[2], form.cols.shape[2]
        if positions * (n_rows + n_cols) >= n_rows * n_cols:
            return _formed(form).pow(2).sum((1, 2))
    return _inner(form, form)


def _layer_norm_weight_gradient(call: _Call, grad_output: torch.Tensor) -> torch.Tensor:
    x = _flat(call.inputs).double()
    normalised = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + call.layer.eps)
    return (_flat(grad_output).double() * normalised).sum(1)


def _vector_gradient(call: _Call, grad_output: torch.Tensor, attr: str) -> torch.Tensor:
    """Per-sample gradient (B, n) of a bias, or of a layer norm's weight."""
    if attr == "weight":
        return _layer_norm_weight_gradient(call, grad_output)
    return _flat(grad_output).double().sum(1)


def per_sample_squared_norms(model: torch.nn.Module, batch_losses, names: list[str]) -> torch.Tensor:
    """(B, len(names)): each sample's squared gradient norm for each named parameter.

    `batch_losses()` runs the model on the batch and returns the per-sample losses (B,).
    Raises UnsupportedLayer for a parameterised layer that is not Linear, Conv1D, Embedding or LayerNorm.
    """
    owners: dict[int, list[tuple[torch.nn.Module, str]]] = {}
    unsupported: dict[int, str] = {}
    for layer in model.modules():
        for attr, parameter in layer.named_parameters(recurse=False):
            if not parameter.requires_grad:
                continue
            if isinstance(layer, SUPPORTED_LAYERS):
                owners.setdefault(id(parameter), []).append((layer, attr))
            else:
                unsupported[id(parameter)] = type(layer).__name__
    # A container may also hold a tensor tied to a supported layer's (BERT's decoder bias); one held only elsewhere is used elsewhere.
    alone = [name for key, name in unsupported.items() if key not in owners]
    if alone:
        raise UnsupportedLayer(alone[0])
    calls: list[_Call] = []

    def record(layer, args, output):
        calls.append(_Call(layer, args[0].detach(), output))

    handles = [layer.register_forward_hook(record) for layer in model.modules() if isinstance(layer, SUPPORTED_LAYERS)
               and any(p.requires_grad for p in layer.parameters(recurse=False))]
    try:
        with torch.enable_grad():
            losses = batch_losses()
            calls = [c for c in calls if c.output.requires_grad]
            broadcast = [c for c in calls if c.output.shape[0] != losses.shape[0]]
            if broadcast:  # an output shared by the batch (e.g. (1, T) positions) mixes the samples' gradients
                raise UnsupportedLayer(f"{type(broadcast[0].layer).__name__} output shared across the batch")
            grads = torch.autograd.grad(losses.sum(), [c.output for c in calls], allow_unused=True)
    finally:
        for handle in handles:
            handle.remove()
    by_layer: dict[int, list[tuple[_Call, torch.Tensor]]] = {}
    for call, grad_output in zip(calls, grads, strict=True):
        if grad_output is None:
            grad_output = torch.zeros_like(call.output)
        by_layer.setdefault(id(call.layer), []).append((call, grad_output))

    parameters = dict(model.named_parameters())
    columns = []
    for name in names:
        parameter = parameters[name]
        uses = [(call, grad, attr) for layer, attr in owners[id(parameter)] for call, grad in by_layer.get(id(layer), [])]
        if not uses:
            columns.append(torch.zeros(losses.shape[0], dtype=torch.float64, device=losses.device))
        elif parameter.dim() == 1:  # biases and layer-norm weights: small enough to form and add
            columns.append(sum(_vector_gradient(call, grad, attr) for call, grad, attr in uses).pow(2).sum(1))
        elif len(uses) == 1:
            columns.append(_weight_squared_norm(_outer_form(uses[0][0], uses[0][1])))
        else:  # one tensor in several layers (tied input and output embeddings): |sum|^2 = sum of all inner products
            forms = [_outer_form(call, grad) for call, grad, _ in uses]
            columns.append(sum(_inner(a, b) for a in forms for b in forms))
    return torch.stack(columns, dim=1)
