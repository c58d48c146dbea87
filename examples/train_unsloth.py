"""STAND-IN TASK: this script trains on a placeholder prompt ("Count from one to ten.") with a
length reward, not your dataset or rewards. grpofit writes it only for a run with no recipe
(a run file or a preset); export from your TRL recipe to launch your own run.

GRPO with Unsloth from a grpofit run file: each table is the keyword arguments of one call.

    grpofit estimate --preset 24gb --export run.toml
    python examples/train_unsloth.py run.toml

Needs unsloth (which brings trl, peft and transformers) and, for fast_inference, vllm. The
dataset and reward below are placeholders: put yours in their place.
"""

import os
import sys
import tomllib

cfg = tomllib.load(open(sys.argv[1] if len(sys.argv) > 1 else "run.toml", "rb"))

# [env] must be in place before torch is imported (allocator settings, Unsloth's standby)
os.environ.update({key: str(value) for key, value in cfg.get("env", {}).items()})

from unsloth import FastLanguageModel  # noqa: E402  (after the environment is set)
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from datasets import Dataset  # noqa: E402

model, tokenizer = FastLanguageModel.from_pretrained(**cfg["model"])
model = FastLanguageModel.get_peft_model(model, **cfg["lora"])
args = GRPOConfig(**cfg["grpo"])

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
    processing_class=tokenizer,
    reward_funcs=[reward_length],
    args=args,
    train_dataset=prompts,
    callbacks=callbacks,
)
trainer.train()
