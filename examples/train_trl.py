"""STAND-IN TASK: this script trains on a placeholder prompt ("Count from one to ten.") with a
length reward, not your dataset or rewards. grpofit writes it only for a run with no recipe
(a run file or a preset); export from your TRL recipe to launch your own run.

GRPO with TRL (transformers + PEFT) from a grpofit run file: each table is the keyword
arguments of one call, loaded the way TRL's own `trl/scripts/grpo.py` loads a model.

    grpofit estimate --config my-trl-run.toml --export run.toml
    python examples/train_trl.py run.toml

Needs trl, peft and transformers (bitsandbytes for load_in_4bit; vllm for use_vllm). The
dataset and reward below are placeholders: put yours in their place.
"""

import os
import sys
import tomllib

cfg = tomllib.load(open(sys.argv[1] if len(sys.argv) > 1 else "run.toml", "rb"))

# [env] must be in place before torch is imported (allocator settings)
os.environ.update({key: str(value) for key, value in cfg.get("env", {}).items()})

from datasets import Dataset  # noqa: E402  (after the environment is set)
from peft import LoraConfig  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from trl import GRPOConfig, GRPOTrainer, ModelConfig, get_quantization_config  # noqa: E402

model_args = ModelConfig(**cfg["model"])
# no [lora]: full fine-tuning (`[model] use_peft = false`)
peft_config = LoraConfig(**cfg["lora"]) if "lora" in cfg else None
# a multi-node launch.sh: every node's trainers reach the one vLLM server on the main node
if os.environ.get("GRPOFIT_VLLM_SERVER_HOST"):
    cfg["grpo"]["vllm_server_host"] = os.environ["GRPOFIT_VLLM_SERVER_HOST"]
args = GRPOConfig(**cfg["grpo"])

quantization_config = get_quantization_config(model_args)
# the attention grpofit's estimate assumed: `[grpo] model_init_kwargs`'s over `[model]`'s, as
# trl's scripts/grpo.py merges them (None: transformers' default, sdpa)
attn_implementation = (args.model_init_kwargs or {}).get(
    "attn_implementation", model_args.attn_implementation
)
model = AutoModelForCausalLM.from_pretrained(
    model_args.model_name_or_path,
    revision=model_args.model_revision,
    dtype=model_args.dtype,
    attn_implementation=attn_implementation,
    quantization_config=quantization_config,
    device_map="auto" if quantization_config is not None else None,
)

prompts = Dataset.from_list([{"prompt": "Count from one to ten."}] * 64)


def reward_length(completions, **kwargs):
    return [-abs(len(c) - 40) / 40 for c in completions]


# grpofit's measuring callback (`grpofit callback` writes grpofit_callback.py): one JSON line of
# GPU memory per step, for `grpofit check grpofit-run.jsonl --config run.toml`; left out when
# the file is absent (looked for beside this script, then in the current folder)
sys.path.append(os.getcwd())
try:
    from grpofit_callback import GrpofitCallback

    callbacks = [GrpofitCallback()]
except ImportError:
    callbacks = []

trainer = GRPOTrainer(
    model=model,
    reward_funcs=[reward_length],
    args=args,
    train_dataset=prompts,
    peft_config=peft_config,
    callbacks=callbacks,
)
trainer.train()
