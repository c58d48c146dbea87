"""Bytes a training pass moves through its memory-bound operators, per token, counted on CPU.

A tiny random model of each family (transformers' own config class, `tiny.py`) runs TRL's
log-prob pass and its backward on one packed sequence of T tokens, as TRL 0.23's
`GRPOTrainer._get_per_token_logps_and_entropies` runs it: `model(...).logits`, the last position
dropped, divided by the temperature, `trl.trainer.utils.selective_log_softmax`, the entropy
(`entropy_from_logits`) under no_grad, and a loss over the log-probs backward. A
`TorchDispatchMode` sums, for every aten operator that is not a matmul (`mm`, `addmm`, `bmm`,
the fused attention kernels) nor a view, the bytes of its tensor inputs and outputs, by operator
and by forward / backward.

Bytes that follow the weights rather than the tokens (a gradient's first write) are cancelled by
counting at two sequence lengths and taking the slope: bytes a token. The slope is then split by
varying one dimension at a time (layers, hidden, intermediate, attention heads, vocabulary) into

    bytes a token = layers x (a.hidden + b.intermediate + c.(q_dim + 2 kv_dim) + layer_rest)
                    + d.hidden + e.vocab + outside_rest

(`layer_rest` and `outside_rest`: what the linear form leaves at the base model, a constant a
token a layer and outside the layers; `time/kernels.rs` `Traffic` `layer` and `outside`), and
the fit is checked against a model twice as wide in every dimension (`check`). With LoRA
(r=8, every linear layer, `lora_dropout` 0 as PEFT's default), `lora` is the extra bytes a token
per (fan_in + fan_out) of every adapted projection.

    tools/trace/traffic.sh [--family qwen3 ...]    # writes calibration/traffic/traffic.json
"""
import argparse
import json
import sys
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import kernels
import tiny

MATMULS = ("mm", "addmm", "bmm", "baddbmm", "_scaled_dot_product", "scaled_dot_product")


def is_matmul(name):
    return any(name == m or name.startswith(m) for m in MATMULS)


# reshapes that alias their input although their schema does not say so
ALIASES = ("_unsafe_view", "_reshape_alias", "lift_fresh", "detach")


def is_view(func):
    # an operator whose outputs alias an input without writing it moves no bytes
    if func.overloadpacket.__name__ in ALIASES:
        return True
    returns = func._schema.returns
    return bool(returns) and all(
        r.alias_info is not None and not r.alias_info.is_write for r in returns
    )


def tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from tensors(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from tensors(y)


def nbytes(t):
    return t.numel() * t.element_size()


class Traffic(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.phase = "forward"
        self.by_op = defaultdict(float)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if is_matmul(name) or is_view(func):
            return out
        moved = sum(nbytes(t) for t in tensors(args)) + sum(nbytes(t) for t in tensors(kwargs))
        moved += sum(nbytes(t) for t in tensors(out))
        self.by_op[(self.phase, name)] += moved
        return out


def build(family, dims, lora, attention="sdpa", dropout=0.0, input_grads=False):
    import transformers

    cls_name, extra = tiny.FAMILIES[family]
    cfg = getattr(transformers, cls_name)(**{**tiny.COMMON, **extra, **dims})
    cfg._attn_implementation = attention
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    if lora:
        import peft

        model = peft.get_peft_model(
            model, peft.LoraConfig(r=8, lora_alpha=16, target_modules="all-linear",
                                   lora_dropout=dropout)
        )
        if input_grads:
            # every adapter's input needs a gradient, as under the trainer's checkpointing
            # (`enable_input_require_grads`), so each dropout runs its backward
            model.enable_input_require_grads()
    else:
        model.requires_grad_(True)
    model.train()
    return model, cfg


def count(model, cfg, tokens):
    """(forward bytes, backward bytes, by operator) of one log-prob pass and its backward."""
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    torch.manual_seed(1)
    ids = torch.randint(4, cfg.vocab_size, (1, tokens + 1))
    mode = Traffic()
    with mode:
        logits = model(input_ids=ids).logits
        logits = logits[:, :-1, :]
        logits = logits / 1.0  # GRPOConfig's temperature, divided as TRL divides it
        logps = selective_log_softmax(logits, ids[:, 1:])
        with torch.no_grad():
            entropy_from_logits(logits)
        loss = -logps.mean()
        mode.phase = "backward"
        loss.backward()
    model.zero_grad(set_to_none=True)
    fwd = sum(v for (p, _), v in mode.by_op.items() if p == "forward")
    bwd = sum(v for (p, _), v in mode.by_op.items() if p == "backward")
    return fwd, bwd, mode.by_op


LENGTHS = (64, 128)


def slope(family, dims, lora=False, dropout=0.0, input_grads=False):
    """Bytes a token, forward and backward: the difference between two lengths."""
    model, cfg = build(family, dims, lora, dropout=dropout, input_grads=input_grads)
    (f1, b1, _), (f2, b2, ops) = (count(model, cfg, t) for t in LENGTHS)
    span = LENGTHS[1] - LENGTHS[0]
    return (f2 - f1) / span, (b2 - b1) / span, ops


def eager_per_score(family):
    """Bytes eager attention (`attn_implementation="eager"`, transformers'
    `eager_attention_forward`: the scores scaled, masked, softmaxed in fp32 and cast back) moves
    beyond SDPA's, per element of the heads x T x T scores, forward and backward: the
    difference of the two at one layer and `BASE`, over `heads x T^2`, at two lengths (equal
    when the traffic is all in the scores)."""
    d = {**BASE, "num_hidden_layers": 1}
    out = []
    for tokens in LENGTHS:
        sdpa, cfg = build(family, d, False)
        eager, _ = build(family, d, False, attention="eager")
        a, b = count(sdpa, cfg, tokens)[:2], count(eager, cfg, tokens)[:2]
        scores = d["num_attention_heads"] * tokens * tokens
        out.append([(b[0] - a[0]) / scores, (b[1] - a[1]) / scores])
    return out


BASE = dict(hidden_size=128, intermediate_size=352, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, vocab_size=tiny.VOCAB)


def dims_of(d):
    q = d["num_attention_heads"] * d["head_dim"]
    kv = d["num_key_value_heads"] * d["head_dim"]
    return d["hidden_size"], d["intermediate_size"], q + 2 * kv, d["vocab_size"]


def split(family, direction):
    """(per layer, outside the layers) bytes a token at `BASE` changed by `direction`."""
    d = {**BASE, **direction}
    one = slope(family, {**d, "num_hidden_layers": 1})
    two = slope(family, {**d, "num_hidden_layers": 2})
    per_layer = [two[i] - one[i] for i in range(2)]
    outside = [one[i] - per_layer[i] for i in range(2)]
    return per_layer, outside


def fit(family):
    """The coefficients a..e, forward and backward, and the check at twice the width."""
    base_l, base_o = split(family, {})
    wide_i_l, _ = split(family, {"intermediate_size": 704})
    heads_l, _ = split(family, {"num_attention_heads": 8, "num_key_value_heads": 4})
    hid_l, hid_o = split(family, {"hidden_size": 256})
    _, voc_o = split(family, {"vocab_size": 2 * tiny.VOCAB})
    h, i, qkv, v = dims_of(BASE)
    coef = {}
    for k, side in enumerate(("forward", "backward")):
        b = (wide_i_l[k] - base_l[k]) / i
        c = (heads_l[k] - base_l[k]) / qkv
        a = (hid_l[k] - base_l[k]) / h
        e = (voc_o[k] - base_o[k]) / v
        d = (hid_o[k] - base_o[k]) / h
        # what the linear form leaves at the base: a constant a token a layer / outside
        coef[side] = dict(hidden=a, intermediate=b, attention=c, head_hidden=d, vocab=e,
                          layer_rest=base_l[k] - (a * h + b * i + c * qkv),
                          outside_rest=base_o[k] - (d * h + e * v))
    return coef


def predict(coef, side, d, layers):
    h, i, qkv, v = dims_of(d)
    c = coef[side]
    layer = c["hidden"] * h + c["intermediate"] * i + c["attention"] * qkv + c["layer_rest"]
    return layers * layer + c["head_hidden"] * h + c["vocab"] * v + c["outside_rest"]


def check(family, coef):
    wide = dict(hidden_size=256, intermediate_size=704, num_attention_heads=8,
                num_key_value_heads=4, head_dim=32, vocab_size=2 * tiny.VOCAB)
    fwd, bwd, _ = slope(family, {**wide, "num_hidden_layers": 2})
    return {"forward": [fwd, predict(coef, "forward", wide, 2)],
            "backward": [bwd, predict(coef, "backward", wide, 2)]}


def lora_coefficient(family):
    """Extra bytes a token per (fan_in + fan_out) of each adapted projection, forward and
    backward, at `BASE` with one layer (the LM head is not adapted: PEFT's all-linear skips it)."""
    d = {**BASE, "num_hidden_layers": 1}
    full = slope(family, d)
    lora = slope(family, d, lora=True)
    model, _ = build(family, d, False)
    fans = sum(m.in_features + m.out_features for n, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and "lm_head" not in n)
    return {"forward": (lora[0] - full[0]) / fans, "backward": (lora[1] - full[1]) / fans}


def lora_dropout_coefficient(family):
    """Extra bytes a token per fan_in of each adapted projection that PEFT's adapter dropout
    (`lora_dropout` 0.05, TRL ModelConfig's default) moves, forward and backward, at `BASE` with
    one layer: `native_dropout` reads the adapter's fp32 copy of its input and writes the
    dropped copy and its bool mask; `native_dropout_backward` reads the gradient and the mask
    and writes the input's gradient. CPU's dropout stood in by `native_dropout`, as on CUDA
    (`kernels.py`). Against LoRA without dropout, both with every input needing a gradient."""
    d = {**BASE, "num_hidden_layers": 1}
    lora = slope(family, d, lora=True, input_grads=True)
    dropped = slope(family, d, lora=True, dropout=0.05, input_grads=True)
    model, _ = build(family, d, False)
    fan_in = sum(m.in_features for n, m in model.named_modules()
                 if isinstance(m, torch.nn.Linear) and "lm_head" not in n)
    return {"forward": (dropped[0] - lora[0]) / fan_in,
            "backward": (dropped[1] - lora[1]) / fan_in}


def top_operators(family):
    _, _, ops = slope(family, {**BASE, "num_hidden_layers": 2})
    total = sum(ops.values())
    ranked = sorted(ops.items(), key=lambda kv: -kv[1])[:12]
    return [[p, n, round(v / total, 4)] for (p, n), v in ranked]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", action="append")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import transformers
    import trl

    kernels.install_dropout()  # the adapters' dropout as on CUDA: `native_dropout`
    record = {"transformers": transformers.__version__, "trl": trl.__version__,
              "torch": torch.__version__, "lengths": LENGTHS, "families": {}}
    for family in args.family or list(tiny.FAMILIES):
        coef = fit(family)
        record["families"][family] = {
            "bytes_per_token": coef,
            "check_twice_as_wide": check(family, coef),
            "lora_per_fan": lora_coefficient(family),
            "lora_dropout_per_fan_in": lora_dropout_coefficient(family),
            "eager_attention_per_score": eager_per_score(family),
            "top_operators_share": top_operators(family),
        }
        print(family, json.dumps(record["families"][family]["check_twice_as_wide"]),
              file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
