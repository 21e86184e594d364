"""Export full-size transformers with symbolic dims, for `hobbit bench --sweep` (issue 28).

    python scripts/export_dynamic_models.py OUTDIR [names...]
    hobbit bench --model OUTDIR/bert_base.onnx --sweep sequence=16,64,128,256,512 --threads 1,2

Why: issue 28 measures one compile of a model against a static compile per shape and against
onnxruntime at sequence lengths 16-512, on the models people run: BERT-base, GPT-2 small (no
cache), DistilBERT-base, the T5-small encoder and Whisper-tiny's encoder at two durations. The
transformer tier's tests export small configs (tests/zoo/transformer_cases.py); this writes the
real sizes, from configs with random weights (nothing is downloaded: HF_HUB_OFFLINE=1), with
torch's classic exporter at the tier's opset. The text models take input_ids and
attention_mask [batch, sequence] and give last_hidden_state [batch, sequence, hidden];
Whisper's encoder takes input_features [batch, 80, frames] and gives [batch, ceil(frames / 2),
384].

Whisper's encoder as transformers writes it accepts exactly 3000 frames (30 s, the length its
feature extractor pads to) and adds all 1500 positional embeddings. To run other durations it
is exported here through a forward of its own modules that adds the first ceil(frames / 2)
embeddings (a Slice whose end is the conv output's length): the same computation at 3000
frames, and the one a streaming or short-audio deployment exports.

Run it in a fresh interpreter, never in a process that holds llvmlite: torch's exporter imports
triton, whose bundled LLVM crashes such a process (see transformer_cases)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.zoo.transformer_cases import OPSET  # noqa: E402

EXAMPLE_SEQUENCE = 16  # the traced example's length; the exported dims are symbolic
EXAMPLE_FRAMES = 64
TEXT_INPUTS = ("input_ids", "attention_mask")


def _bert():
    from transformers import BertConfig, BertModel
    return BertModel(BertConfig(attn_implementation="eager"), add_pooling_layer=False)


def _gpt2():
    from transformers import GPT2Config, GPT2Model
    return GPT2Model(GPT2Config(use_cache=False, attn_implementation="eager"))


def _distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    return DistilBertModel(DistilBertConfig(attn_implementation="eager"))


def _t5_small_encoder():
    """t5-small's numbers (its config on the Hub), written out so nothing is fetched."""
    from transformers import T5Config, T5EncoderModel
    config = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
                      relative_attention_num_buckets=32, feed_forward_proj="relu", attn_implementation="eager")
    return T5EncoderModel(config)


def _whisper_tiny_encoder():
    """Whisper-tiny's encoder (its config's numbers) with the positional embeddings sliced to
    the frames given (see the module docstring)."""
    import torch
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                           num_mel_bins=80, max_source_positions=1500, attn_implementation="eager")
    encoder = WhisperEncoder(config)

    class AnyDuration(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_features):
            e = self.encoder
            x = torch.nn.functional.gelu(e.conv1(input_features))
            x = torch.nn.functional.gelu(e.conv2(x)).permute(0, 2, 1)
            x = x + e.embed_positions.weight[: x.shape[1]]
            for layer in e.layers:
                x = layer(x, None)
            return e.layer_norm(x)

    return AnyDuration()


# name: (builder, the inputs and their symbolic dims)
MODELS = {
    "bert_base": (_bert, TEXT_INPUTS),
    "gpt2": (_gpt2, TEXT_INPUTS),
    "distilbert": (_distilbert, TEXT_INPUTS),
    "t5_small_encoder": (_t5_small_encoder, TEXT_INPUTS),
    "whisper_tiny_encoder": (_whisper_tiny_encoder, ("input_features",)),
}


def export(name: str, path: Path) -> None:
    """One model, eval mode, seed 0, to `path` with symbolic batch and sequence (frames) dims."""
    import torch

    build, names = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    if names == TEXT_INPUTS:
        example = (torch.randint(0, 100, (1, EXAMPLE_SEQUENCE)), torch.ones(1, EXAMPLE_SEQUENCE, dtype=torch.int64))
        axes = {n: {0: "batch", 1: "sequence"} for n in (*names, "output")}

        class Text(torch.nn.Module):  # keyword inputs in, last_hidden_state out
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask):
                return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        module = Text()
    else:
        example = (torch.randn(1, 80, EXAMPLE_FRAMES),)
        axes = {"input_features": {0: "batch", 2: "frames"}, "output": {0: "batch", 1: "positions"}}
        module = model
    with torch.no_grad():
        torch.onnx.export(module, example, str(path), input_names=list(names), output_names=["output"],
                          opset_version=OPSET, dynamo=False, dynamic_axes=axes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where OUTDIR/<name>.onnx are written")
    parser.add_argument("names", nargs="*", default=list(MODELS), help=f"any of {', '.join(MODELS)} (default: all)")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    os.environ["HF_HUB_OFFLINE"] = "1"  # models come from configs: never reach the Hub
    args.folder.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        t0 = time.perf_counter()
        path = args.folder / f"{name}.onnx"
        export(name, path)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB, {time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
