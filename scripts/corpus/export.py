"""Exports the real-architecture corpus: small configs, random weights, nothing downloaded.

Runs in .venv-corpus (torch, torchvision, transformers; see scripts/corpus/requirements.txt):
    python3 -m venv .venv-corpus && .venv-corpus/bin/pip install -r scripts/corpus/requirements.txt
    .venv-corpus/bin/python scripts/corpus/export.py            # all models
    .venv-corpus/bin/python scripts/corpus/export.py bert gpt2  # some
Each model is exported with torch.onnx.export, checked against torch on the exported inputs, then
packed (large float weights replaced by a regeneration recipe, tests/corpus/corpus.py) into
tests/corpus/models/<name>.onnx.
"""

from __future__ import annotations

import contextlib
import io
import sys
import traceback
import warnings
import zlib
from pathlib import Path

import numpy as np
import onnx
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "corpus"))
import corpus  # noqa: E402  (onnx + numpy only: shared with the tests)

TS_OPSET = 17  # TorchScript exporter
DYNAMO_OPSET = 18


def perturb(module: torch.nn.Module, seed: int) -> None:
    """Random weights that are not the library's init constants: normalisation scales/shifts and
    BatchNorm statistics are ones/zeros at init, which would make those ops trivial."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in list(module.named_parameters()) + list(module.named_buffers()):
            if not p.is_floating_point():
                continue
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "running_var":
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif leaf == "running_mean":
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            elif p.ndim == 1 and ("norm" in name.lower() or "ln" in name.lower() or "bn" in name
                                  or name.endswith("bias") or "layer_scale" in name):
                base = 1.0 if leaf in ("weight", "gamma") or "layer_scale" in name else 0.0
                p.copy_(base + torch.randn(p.shape, generator=g) * 0.1)
    module.eval()


class Wrap(torch.nn.Module):
    """Calls model(**kwargs) with fixed keyword names and returns a tuple of tensors."""

    def __init__(self, model, names, out_keys, **fixed):
        super().__init__()
        self.model, self.names, self.out_keys, self.fixed = model, names, out_keys, fixed

    def forward(self, *args):
        out = self.model(**dict(zip(self.names, args)), **self.fixed)
        if isinstance(out, torch.Tensor):
            return out
        return tuple(getattr(out, k) if not isinstance(out, (tuple, list)) else out[i]
                     for i, k in enumerate(self.out_keys))


def ids(batch, seq, vocab, name="input_ids", low=0):
    return name, {"kind": "int", "low": low, "high": vocab, "shape": [batch, seq], "dtype": "int64"}


def mask(batch, seq, pad=2, name="attention_mask"):
    return name, {"kind": "mask", "pad": pad, "shape": [batch, seq], "dtype": "int64"}


def image(shape, name="x"):
    return name, {"kind": "normal", "std": 1.0, "shape": list(shape), "dtype": "float32"}


def example(spec: dict, rng: np.random.Generator) -> torch.Tensor:
    shape = spec["shape"]
    if spec["kind"] == "int":
        a = rng.integers(spec["low"], spec["high"], size=shape)
    elif spec["kind"] == "mask":
        a = np.ones(shape)
        if shape[0] > 1 and spec.get("pad"):
            a[1, -spec["pad"]:] = 0
    else:
        a = rng.normal(0, spec.get("std", 1.0), size=shape)
    return torch.from_numpy(a.astype(spec["dtype"]))


# ---- model builders: name -> (module, [(input name, spec)], [output names], exporter) ----------

def tv_resnet():
    from torchvision.models.resnet import BasicBlock, ResNet
    return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10), [image([1, 3, 32, 32])], ["logits"]


def tv_mobilenet_v3_small():
    from torchvision.models import mobilenet_v3_small
    return mobilenet_v3_small(width_mult=0.25, num_classes=10), [image([1, 3, 64, 64])], ["logits"]


def tv_efficientnet_b0():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    return EfficientNet(setting, dropout=0.2, last_channel=last, num_classes=10), \
        [image([1, 3, 64, 64])], ["logits"]


def tv_convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    cfg = [CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1), CNBlockConfig(64, None, 1)]
    return ConvNeXt(cfg, stochastic_depth_prob=0.0, num_classes=10), [image([1, 3, 32, 32])], \
        ["logits"]


def tv_vit():
    from torchvision.models.vision_transformer import VisionTransformer
    m = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                          mlp_dim=64, num_classes=10)
    return m, [image([2, 3, 32, 32])], ["logits"]


def hf_bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, type_vocab_size=2)
    m = BertModel(cfg, add_pooling_layer=True)
    ins = [ids(2, 12, 100), mask(2, 12), ids(2, 12, 2, name="token_type_ids")]
    return Wrap(m, [n for n, _ in ins], ["last_hidden_state", "pooler_output"]), ins, \
        ["last_hidden_state", "pooler_output"]


def hf_distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    cfg = DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                           max_position_embeddings=64)
    m = DistilBertModel(cfg)
    ins = [ids(2, 12, 100), mask(2, 12)]
    return Wrap(m, [n for n, _ in ins], ["last_hidden_state"]), ins, ["last_hidden_state"]


def hf_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=32, n_inner=64,
                     use_cache=False)
    m = GPT2LMHeadModel(cfg)
    ins = [ids(2, 10, 100), mask(2, 10)]
    return Wrap(m, [n for n, _ in ins], ["logits"], use_cache=False), ins, ["logits"]


def hf_t5():
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_decoder_layers=1,
                   num_heads=2, relative_attention_num_buckets=8,
                   relative_attention_max_distance=16, decoder_start_token_id=0, use_cache=False)
    m = T5ForConditionalGeneration(cfg)
    ins = [ids(2, 10, 100), mask(2, 10), ids(2, 6, 100, name="decoder_input_ids")]
    return Wrap(m, [n for n, _ in ins], ["logits"], use_cache=False), ins, ["logits"]


def _whisper_cfg():
    from transformers import WhisperConfig
    return WhisperConfig(vocab_size=100, num_mel_bins=16, d_model=32, encoder_layers=1,
                         decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                         encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
                         max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                         decoder_start_token_id=1, use_cache=False)


def hf_whisper_encoder():
    from transformers import WhisperModel
    m = WhisperModel(_whisper_cfg()).get_encoder()
    ins = [image([1, 16, 32], name="input_features")]
    return Wrap(m, ["input_features"], ["last_hidden_state"]), ins, ["last_hidden_state"]


def hf_whisper():
    from transformers import WhisperForConditionalGeneration
    m = WhisperForConditionalGeneration(_whisper_cfg())
    ins = [image([1, 16, 32], name="input_features"), ids(1, 6, 100, name="decoder_input_ids")]
    return Wrap(m, [n for n, _ in ins], ["logits"], use_cache=False), ins, ["logits"]


def hf_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      rope_theta=10000.0, use_cache=False, tie_word_embeddings=False)
    m = LlamaForCausalLM(cfg)
    ins = [ids(2, 10, 100), mask(2, 10)]
    return Wrap(m, [n for n, _ in ins], ["logits"], use_cache=False), ins, ["logits"]


# name -> (builder, exporter)
MODELS = {
    "resnet18s": (tv_resnet, "torchscript"),
    "mobilenet_v3_small": (tv_mobilenet_v3_small, "torchscript"),
    "efficientnet_b0": (tv_efficientnet_b0, "torchscript"),
    "convnext": (tv_convnext, "torchscript"),
    "vit": (tv_vit, "torchscript"),
    "bert": (hf_bert, "torchscript"),
    "distilbert": (hf_distilbert, "torchscript"),
    "gpt2": (hf_gpt2, "torchscript"),
    "gpt2_dynamo": (hf_gpt2, "dynamo"),
    "t5": (hf_t5, "torchscript"),
    "whisper_encoder": (hf_whisper_encoder, "torchscript"),
    "whisper": (hf_whisper, "torchscript"),
    "llama": (hf_llama, "torchscript"),
    "llama_dynamo": (hf_llama, "dynamo"),
}


def _patch_dynamo_version_converter() -> None:
    """torch 2.9.1 + onnxscript 0.5.6: the dynamo exporter always runs onnxscript's version
    converter, whose InlinePass inlines the exported functions but keeps their (now unused)
    definitions, and the converter then refuses a model with functions. Drop the unused
    definitions between the two passes."""
    from onnx_ir.passes import common as common_passes
    from torch.onnx._internal.exporter import _compat

    convert = _compat.onnxscript_apis.convert_version
    if getattr(convert, "corpus_patched", False):
        return

    def convert_version(model, target_version):
        common_passes.InlinePass()(model)
        common_passes.RemoveUnusedFunctionsPass()(model)
        return convert(model, target_version)

    convert_version.corpus_patched = True
    _compat.onnxscript_apis.convert_version = convert_version


@contextlib.contextmanager
def masks_for_tracing():
    """transformers 4.57 builds attention masks with torch.vmap on torch >= 2.6, which the
    TorchScript tracer cannot follow (RuntimeError: unordered_map::at). Use its own path for
    older torch (plain broadcasting) while tracing; restored afterwards (the dynamo exporter
    handles vmap)."""
    try:
        from transformers import masking_utils as mu
    except ImportError:
        yield
        return
    saved = (mu._is_torch_greater_or_equal_than_2_6, mu.sdpa_mask,
             mu.AttentionMaskInterface._global_mapping["sdpa"])
    mu._is_torch_greater_or_equal_than_2_6 = False
    mu.sdpa_mask = mu.AttentionMaskInterface._global_mapping["sdpa"] = mu.sdpa_mask_older_torch
    try:
        yield
    finally:
        (mu._is_torch_greater_or_equal_than_2_6, mu.sdpa_mask,
         mu.AttentionMaskInterface._global_mapping["sdpa"]) = saved


def zlib_seed(name: str) -> int:
    return zlib.crc32(name.encode())


def export_one(name: str) -> dict:
    builder, exporter = MODELS[name]
    torch.manual_seed(0)
    module, inputs, out_names = builder()
    perturb(module, seed=zlib_seed(name))
    rng = np.random.default_rng(zlib_seed(name))
    specs = [dict(spec, name=n) for n, spec in inputs]
    args = tuple(example(s, rng) for s in specs)
    with torch.no_grad():
        want = module(*args)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    if exporter == "dynamo":
        _patch_dynamo_version_converter()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            prog = torch.onnx.export(module, args, input_names=[s["name"] for s in specs],
                                     output_names=out_names, opset_version=DYNAMO_OPSET,
                                     dynamo=True, external_data=False, verbose=False)
            model = prog.model_proto
        else:
            with masks_for_tracing():
                torch.onnx.export(module, args, buf, input_names=[s["name"] for s in specs],
                                  output_names=out_names, opset_version=TS_OPSET,
                                  dynamo=False, do_constant_folding=True)
            model = onnx.load_from_string(buf.getvalue())
    model.ir_version = min(model.ir_version, corpus.IR_VERSION)
    onnx.checker.check_model(model)
    max_err = check_against_torch(model, specs, args, want)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    info = {"exporter": exporter, "opset": opset, "torch": torch.__version__,
            "source": builder.__name__, "torch_max_abs_err": max_err}
    try:
        import transformers
        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    nodes = corpus.model_node_count(model)
    packed = corpus.pack_model(model, name, specs, info)
    corpus.MODELS_DIR.mkdir(parents=True, exist_ok=True)
    path = corpus.MODELS_DIR / f"{name}.onnx"
    onnx.save(packed, str(path))
    return {"nodes": nodes, "bytes": path.stat().st_size, "max_err": max_err, "opset": opset}


def check_against_torch(model, specs, args, want) -> float:
    """The exported graph (original weights) must reproduce torch's outputs."""
    try:
        import onnxruntime as ort
    except ImportError:
        return float("nan")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {s["name"]: a.numpy() for s, a in zip(specs, args)})
    err = 0.0
    for g, w in zip(got, want):
        w = w.detach().numpy()
        assert g.shape == w.shape, (g.shape, w.shape)
        err = max(err, float(np.max(np.abs(g - w))))
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)
    return err


def main(argv: list[str]) -> int:
    names = argv or list(MODELS)
    failed = []
    for name in names:
        try:
            r = export_one(name)
            print(f"{name}: {r['nodes']} nodes, opset {r['opset']}, {r['bytes'] / 1024:.1f} KiB, "
                  f"max |onnx - torch| {r['max_err']:.2e}")
        except Exception as e:  # keep going: report every exporter failure at the end
            traceback.print_exc()
            failed.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    for f in failed:
        print("FAILED", f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
