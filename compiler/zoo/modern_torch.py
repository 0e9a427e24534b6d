"""Real exports of today's encoders: torch modules exported by ``torch.onnx`` at opset 17, seeded weights.

* :func:`bert_export` - the ``transformers`` package's ``BertModel`` (small config), input ``input_ids``
  (1, tokens) int64, output ``last_hidden_state``.
* :func:`vit_export` - ``transformers``' ``ViTModel`` (small config, no pooler), input ``pixel_values``
  (1, 3, image, image), output ``last_hidden_state``.
* :func:`recognizer_export` - a CRNN/SVTR-style text recognizer written in torch (conv-BN-ReLU backbone
  that collapses the height, a pre-norm ``nn.TransformerEncoderLayer`` neck with GELU, a CTC linear head
  with Softmax), input ``images`` (1, 3, height, width).

Nothing is downloaded: models are built from configs, weights drawn by ``torch.manual_seed(seed)`` (the
packages' own initializers; LayerNorm gains/biases and BatchNorm statistics perturbed so they are not the
identity). torch and transformers are optional (``pip install vta-stack[modern]``); only
``benchmarks/bench_modern.py`` uses this module (the tests build onnx.helper versions, :mod:`compiler.zoo.modern`).
The TorchScript exporter (``dynamo=False``) is used: it needs no onnxscript.
"""
from __future__ import annotations

import io

import onnx

OPSET = 17


def _torch():
    try:
        import torch
    except ImportError as exc:  # optional extra
        raise ImportError("the real-export models need torch and transformers: pip install 'vta-stack[modern]'") from exc
    return torch


def _perturb_norms(module, seed: int) -> None:
    """LayerNorm/BatchNorm parameters away from the identity (seeded), as in trained models."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (torch.nn.LayerNorm, torch.nn.BatchNorm2d)):
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(1 + 0.5 * torch.rand(m.running_var.shape, generator=g))


def _export(module, args: tuple, input_names: list[str], output_names: list[str]) -> onnx.ModelProto:
    torch = _torch()
    module.eval()
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, args, buf, opset_version=OPSET, dynamo=False, input_names=input_names,
                          output_names=output_names, do_constant_folding=True)
    return onnx.load_from_string(buf.getvalue())


def _last_hidden(model):
    """A module around a transformers model whose one output is ``last_hidden_state``."""
    torch = _torch()

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            return self.model(x, return_dict=True).last_hidden_state

    return LastHidden()


def bert_export(tokens: int = 16, hidden: int = 64, heads: int = 4, layers: int = 2, intermediate: int = 256,
                vocab: int = 128, seed: int = 0) -> onnx.ModelProto:
    """``transformers.BertModel`` with a small config (GELU erf, post-norm), exported at opset 17."""
    torch = _torch()
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=intermediate, max_position_embeddings=max(tokens, 32), hidden_act="gelu",
                     attn_implementation="eager")
    model = BertModel(cfg, add_pooling_layer=False)
    _perturb_norms(model, seed)
    ids = torch.randint(1, vocab, (1, tokens), generator=torch.Generator().manual_seed(seed))
    return _export(_last_hidden(model), (ids,), ["input_ids"], ["last_hidden_state"])


def vit_export(image: int = 32, patch: int = 8, hidden: int = 64, heads: int = 4, layers: int = 2,
               intermediate: int = 256, seed: int = 1) -> onnx.ModelProto:
    """``transformers.ViTModel`` with a small config (pre-norm, GELU erf, class token), exported at opset 17."""
    torch = _torch()
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(seed)
    cfg = ViTConfig(image_size=image, patch_size=patch, hidden_size=hidden, num_hidden_layers=layers,
                    num_attention_heads=heads, intermediate_size=intermediate, hidden_act="gelu",
                    attn_implementation="eager")
    model = ViTModel(cfg, add_pooling_layer=False)
    _perturb_norms(model, seed)
    x = torch.randn(1, 3, image, image, generator=torch.Generator().manual_seed(seed))
    return _export(_last_hidden(model), (x,), ["pixel_values"], ["last_hidden_state"])


def recognizer_export(height: int = 32, width: int = 128, hidden: int = 64, heads: int = 4, classes: int = 37,
                      seed: int = 4) -> onnx.ModelProto:
    """A CRNN/SVTR-style recognizer in torch: output per-column class probabilities (1, width / 4, classes)."""
    torch = _torch()
    nn = torch.nn

    def cbr(cin, cout, stride):
        return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    class Recognizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(*cbr(3, 32, 2), *cbr(32, 64, 2), *cbr(64, hidden, 1),
                                          nn.MaxPool2d((2, 1), (2, 1)), *cbr(hidden, hidden, 1),
                                          nn.MaxPool2d((height // 8, 1), (height // 8, 1)))
            self.neck = nn.TransformerEncoderLayer(hidden, heads, 2 * hidden, dropout=0.0, activation="gelu",
                                                   batch_first=True, norm_first=True)
            self.norm = nn.LayerNorm(hidden)
            self.head = nn.Linear(hidden, classes)

        def forward(self, x):
            f = self.backbone(x).flatten(2).transpose(1, 2)  # (1, width/4, hidden)
            return torch.softmax(self.head(self.norm(self.neck(f))), dim=-1)

    torch.manual_seed(seed)
    model = Recognizer()
    _perturb_norms(model, seed)
    x = torch.randn(1, 3, height, width, generator=torch.Generator().manual_seed(seed))
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused encoder-layer kernel has no ONNX export
    try:
        return _export(model, (x,), ["images"], ["probs"])
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)


EXPORTS = {"bert": bert_export, "vit": vit_export, "recognizer": recognizer_export}
