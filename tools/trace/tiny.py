"""Tiny random models of each family, built from the real config class, saved with a word-level
tokenizer to a temp folder (no download). Dimensions are small but keep every structural feature:
grouped-query attention (2 KV heads of 4), untied head, each family's norms and fused projections.
"""
import json
import os

import torch

WORDS = 960  # w0..w959, plus four special tokens: vocabulary 964 (> every sequence length)
VOCAB = WORDS + 4

COMMON = dict(hidden_size=128, intermediate_size=352, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=32, vocab_size=VOCAB, max_position_embeddings=512,
              tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)

# family -> (config class name, extra fields), all read from transformers' own config classes
FAMILIES = {
    "qwen2": ("Qwen2Config", {}),
    "qwen3": ("Qwen3Config", {}),
    "llama": ("LlamaConfig", {}),
    "gemma3": ("Gemma3TextConfig", {"sliding_window": 16, "query_pre_attn_scalar": 32}),
    "mistral": ("MistralConfig", {"sliding_window": None}),
    "phi3": ("Phi3Config", {}),
}


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    vocab.update({f"w{i}": i + 4 for i in range(WORDS)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                                  eos_token="</s>", unk_token="<unk>")
    # no token_type_ids (transformers 4.48's default names), which generate() refuses
    out.model_input_names = ["input_ids", "attention_mask"]
    return out


def config(family, fields=None):
    """The family's config at the tiny dimensions, or `fields` (a config.json's, with its
    `model_type`) when given: `calibration/measure_trainer.py` builds real dimensions so."""
    import transformers

    if fields is not None:
        kw = dict(fields)
        return transformers.AutoConfig.for_model(kw.pop("model_type"), **kw)
    cls_name, extra = FAMILIES[family]
    cls = getattr(transformers, cls_name, None)
    if cls is None:
        return None
    cfg = cls(**{**COMMON, **extra})
    return cfg


def save(family, folder, head="causal", fields=None):
    """Saves a random bf16 model of `family` and the tokenizer; returns its config as a dict, or
    None when this transformers lacks the family."""
    import transformers

    cfg = config(family, fields)
    if cfg is None:
        return None
    torch.manual_seed(0)
    if head == "causal":
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    else:
        cfg.num_labels = 1
        model = transformers.AutoModelForSequenceClassification.from_config(cfg)
    model = model.to(torch.bfloat16)
    # the checkpoint says bf16, as users' do: a model the trainer loads itself (the reference
    # model) with the default dtype ("auto" in transformers 5) comes back in bf16
    key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    setattr(model.config, key, torch.bfloat16)
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    with open(os.path.join(folder, "config.json")) as f:
        return json.load(f)


def prompts(n, seed=0):
    """Prompts of different lengths (6 to 30 words), so a batch is padded."""
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = 6 + (i * 7) % 25
        out.append(" ".join(f"w{rnd.randrange(WORDS)}" for _ in range(k)))
    return out
