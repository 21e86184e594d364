"""The transformer tier's models: small configs of transformers and timm models with random
weights (nothing downloaded), exported by torch's classic exporter at opset 17, once with a
static batch of 1 and once with a symbolic batch.

The export runs in a fresh interpreter (`python -m tests.zoo.transformer_cases FOLDER`):
torch's exporter imports triton, whose bundled LLVM crashes a process that already holds
llvmlite's and TensorFlow's. The test process itself needs only numpy for the feeds."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

OPSET = 17
VOCAB = 96
SEQ = 12  # tokens of the text models


@dataclass(frozen=True)
class Input:
    """A model input after its batch dim: token ids below `high`, a padding mask, or floats."""

    name: str
    shape: tuple[int, ...]
    kind: str = "float"  # "float", "ids" or "mask"
    high: int = VOCAB


@dataclass(frozen=True)
class Case:
    name: str
    inputs: tuple[Input, ...]
    library: str  # what builds it: "transformers" or "timm"


_IMAGE = (Input("pixel_values", (3, 32, 32)),)
_TEXT = (Input("input_ids", (SEQ,), "ids"), Input("attention_mask", (SEQ,), "mask"))

CASES = {case.name: case for case in (
    Case("vit", _IMAGE, "transformers"),
    Case("deit", _IMAGE, "timm"),
    Case("swin", _IMAGE, "timm"),
    Case("bert", _TEXT + (Input("token_type_ids", (SEQ,), "ids", 2),), "transformers"),
    Case("gpt2", _TEXT, "transformers"),
    Case("distilbert", _TEXT, "transformers"),
    Case("t5_encoder", _TEXT, "transformers"),
    Case("whisper_encoder", (Input("input_features", (16, 32)),), "transformers"),
    Case("mobilevit", _IMAGE, "transformers"),
)}


def feeds(case: Case, batch: int, seed: int) -> dict[str, np.ndarray]:
    """Random inputs: N(0, 1) floats, token ids, and masks whose later rows end in padding."""
    rng = np.random.default_rng(seed)
    out = {}
    for spec in case.inputs:
        shape = (batch,) + spec.shape
        if spec.kind == "ids":
            out[spec.name] = rng.integers(0, spec.high, shape, dtype=np.int64)
        elif spec.kind == "mask":
            mask = np.ones(shape, np.int64)
            for row in range(1, batch):
                mask[row, -3 * row:] = 0
            out[spec.name] = mask
        else:
            out[spec.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def exported(names: list[str], kinds: tuple = (False, True)) -> tuple[dict[tuple[str, bool | str], bytes],
                                                                       dict[str, str]]:
    """{(name, kind): ONNX bytes} of the named cases, exported in a fresh interpreter, for each
    kind of `export`'s `symbolic`, and {name: traceback} of the ones whose export failed."""
    flags = ["--sequence"] if "sequence" in kinds else []
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, "-m", "tests.zoo.transformer_cases", *flags, folder, *names], check=True,
                       capture_output=True, timeout=1200, cwd=Path(__file__).parents[2])
        models = {(name, kind): (Path(folder) / _file(name, kind)).read_bytes()
                  for name in names for kind in kinds if (Path(folder) / _file(name, kind)).exists()}
        errors = {path.stem: path.read_text() for path in Path(folder).glob("*.error")}
    return models, errors


def exported_decode() -> bytes:
    """export_decode's ONNX bytes, exported in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, "-m", "tests.zoo.transformer_cases", "--decode", folder], check=True,
                       capture_output=True, timeout=1200, cwd=Path(__file__).parents[2])
        return (Path(folder) / "gpt2_decode.onnx").read_bytes()


def _file(name: str, symbolic: bool | str) -> str:
    kind = symbolic if isinstance(symbolic, str) else "symbolic" if symbolic else "static"
    return f"{name}_{kind}.onnx"


# -- building and exporting (the fresh interpreter only) -----------------------------------

def _module(name: str):
    """The model in eval mode, wrapped to take its inputs in `CASES` order and give tensors."""
    import torch

    torch.manual_seed(0)
    model, output = _BUILDERS[name]()
    model.eval()

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            kwargs = {spec.name: a for spec, a in zip(CASES[name].inputs, args)}
            result = self.model(**kwargs) if CASES[name].library == "transformers" else self.model(*args)
            return result if output is None else getattr(result, output)

    return Wrapped()


def _vit():
    from transformers import ViTConfig, ViTModel
    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       image_size=32, patch_size=8)
    return ViTModel(config), "last_hidden_state"


def _deit():
    """DeiT with distillation: a class and a distillation token before the patches."""
    import timm
    return timm.create_model("deit_tiny_distilled_patch16_224", pretrained=False, img_size=32, patch_size=8,
                             embed_dim=32, depth=2, num_heads=2, num_classes=0), None


def _swin():
    import timm
    return timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, img_size=32, patch_size=2,
                             window_size=4, embed_dim=16, depths=(2, 2), num_heads=(1, 2), num_classes=0), None


def _bert():
    from transformers import BertConfig, BertModel
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
    return BertModel(config), "last_hidden_state"


def _gpt2():
    from transformers import GPT2Config, GPT2Model
    config = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64, use_cache=False,
                        bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    return GPT2Model(config), "last_hidden_state"


def _distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    config = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                              max_position_embeddings=64, attn_implementation="eager")
    return DistilBertModel(config), "last_hidden_state"


def _t5_encoder():
    from transformers import T5Config, T5EncoderModel
    config = T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                      attn_implementation="eager")
    return T5EncoderModel(config), "last_hidden_state"


def _whisper_encoder():
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    config = WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64,
                           num_mel_bins=16, max_source_positions=16, attn_implementation="eager")
    return WhisperEncoder(config), "last_hidden_state"


def _mobilevit():
    """Convolutions and BatchNorm as torch initialises them, the BatchNorm statistics
    calibrated on random images (transformers draws BatchNorm scales near 0, which zeroes
    the output)."""
    import torch
    from transformers import MobileViTConfig, MobileViTModel
    config = MobileViTConfig(image_size=32, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
                             num_attention_heads=2, attn_implementation="eager")
    model = MobileViTModel(config)
    for module in model.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.BatchNorm2d)):
            module.reset_parameters()
        if isinstance(module, torch.nn.BatchNorm2d):
            module.momentum = None  # a cumulative average over the calibration batch
    model.train()
    with torch.no_grad():
        model(pixel_values=torch.randn(8, 3, 32, 32))
    return model, "last_hidden_state"


_BUILDERS = {"vit": _vit, "deit": _deit, "swin": _swin, "bert": _bert, "gpt2": _gpt2, "distilbert": _distilbert,
             "t5_encoder": _t5_encoder, "whisper_encoder": _whisper_encoder, "mobilevit": _mobilevit}


def export(name: str, symbolic: bool | str, path: Path) -> None:
    """symbolic: False (batch 1), True (a symbolic batch) or "sequence" (symbolic batch and, for
    the token inputs and the output, a symbolic sequence)."""
    import torch

    case = CASES[name]
    example = tuple(torch.from_numpy(a) for a in feeds(case, 1, 0).values())
    names = [spec.name for spec in case.inputs]
    axes = {n: {0: "batch"} for n in names + ["output"]} if symbolic else None
    if symbolic == "sequence":
        axes = {n: {0: "batch", 1: "sequence"} for n in names + ["output"]}
    torch.onnx.export(_module(name), example, str(path), input_names=names, output_names=["output"],
                      opset_version=OPSET, dynamo=False, dynamic_axes=axes)


DECODE = {"layers": 2, "heads": 2, "head_dim": 16, "positions": 128, "vocab": VOCAB}
# GPT-2 small's own sizes, for `hobbit bench --decode` (random weights, nothing downloaded).
GPT2_SMALL = {"layers": 12, "heads": 12, "head_dim": 64, "positions": 1024, "vocab": 50257}


def export_decode(path: Path, sizes: dict[str, int] = DECODE) -> None:
    """GPT-2 (DECODE's small config, or `sizes`) as one decoding step with its key/value cache as inputs and
    outputs: input_ids [1, 1] and position_ids [1, 1], past_<layer>_k/v [1, heads, past, head_dim]
    -> logits [1, 1, vocab] and present_<layer>_k/v [1, heads, past + 1, head_dim]. The position
    is an input, as decoding exports have it: computed from the cache's length inside the
    graph, it would fold into a constant of one length."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.cache_utils import DynamicCache

    layers, heads, dim = sizes["layers"], sizes["heads"], sizes["head_dim"]
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=sizes["vocab"], n_embd=heads * dim, n_layer=layers, n_head=heads,
                        n_positions=sizes["positions"], attn_implementation="eager")
    model = GPT2LMHeadModel(config).eval()

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, position_ids, *past):
            cache = DynamicCache()
            for layer in range(layers):
                cache.update(past[2 * layer], past[2 * layer + 1], layer)
            out = self.model(input_ids=input_ids, past_key_values=cache, position_ids=position_ids, use_cache=True)
            present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (out.logits, *present)

    past = [torch.randn(1, heads, 5, dim) for _ in range(2 * layers)]
    names = [f"past_{layer}_{kv}" for layer in range(layers) for kv in "kv"]
    outputs = ["logits"] + [n.replace("past", "present") for n in names]
    axes = {**{n: {2: "past"} for n in names}, **{n: {2: "total"} for n in outputs[1:]}}
    torch.onnx.export(Step(), (torch.tensor([[1]]), torch.tensor([[5]]), *past), str(path),
                      input_names=["input_ids", "position_ids"] + names, output_names=outputs,
                      opset_version=OPSET, dynamo=False, dynamic_axes=axes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("names", nargs="*", default=list(CASES))
    parser.add_argument("--sequence", action="store_true", help="export the text models with a symbolic sequence")
    parser.add_argument("--decode", action="store_true", help="export GPT-2's decoding step (export_decode) only")
    parser.add_argument("--gpt2-small", action="store_true", help="with --decode: GPT-2 small's sizes")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"  # models come from configs: never reach the Hub
    if args.decode:
        export_decode(args.folder / "gpt2_decode.onnx", GPT2_SMALL if args.gpt2_small else DECODE)
        return
    for name in args.names:
        try:
            for symbolic in ("sequence",) if args.sequence else (False, True):
                export(name, symbolic, args.folder / _file(name, symbolic))
        except Exception:  # the test of that model reports it; the others still export
            (args.folder / f"{name}.error").write_text(traceback.format_exc())


if __name__ == "__main__":
    main()
