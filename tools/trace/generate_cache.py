"""Whether transformers' `generate` keeps its KV cache when the model is in training mode with
gradient checkpointing on, as TRL before 0.22 calls it (its `unwrap_model_for_generation` first
turns checkpointing off in 0.22.2). Prints, for eval and for training + checkpointing, each call
of the first layer's attention as (query tokens, cache length before it; None: no cache).

    tools/trace/generate_cache.sh 0.20.0   # transformers 4.54.1: (1, None) each decode step

Read by `crates/grpofit-core/src/time/generate_mode.rs` (`drops_kv_cache`): 4.50.3 and 4.52.4
keep the cache, 4.53.1 and 4.54.1 (`GradientCheckpointingLayer`) drop it.
"""
import torch
import transformers

import ops


def layer_zero_calls(training):
    model, cfg = ops.build("qwen2", 2, None)
    if training:
        model.gradient_checkpointing_enable()
        model.train()
    else:
        model.eval()
    calls = []

    def pre(module, args, kwargs):
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        cache = kwargs.get("past_key_values", kwargs.get("past_key_value"))
        calls.append((int(hidden.shape[1]), None if cache is None else int(cache.get_seq_length())))

    model.model.layers[0].self_attn.register_forward_pre_hook(pre, with_kwargs=True)
    torch.manual_seed(2)
    ids = torch.randint(4, cfg.vocab_size, (2, ops.PROMPT))
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                       generation_config=ops.generation_config(6))
    return calls


if __name__ == "__main__":
    for training in (False, True):
        mode = "training + checkpointing" if training else "eval"
        print(transformers.__version__, mode, layer_zero_calls(training))
