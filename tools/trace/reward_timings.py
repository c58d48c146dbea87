"""Runs the real `GRPOTrainer.train()` of the TRL release on PYTHONPATH for two optimizer steps on
CPU, on a tiny random qwen2 (tiny.py), with grpofit's callback (examples/grpofit_callback.py) and
three rewards: a Python function, an `async` one (TRL 1.0 on) and a reward model; and checks
that each step line names them in `reward_funcs` with their kind and carries TRL's timing of
each in `trl_timings` (what `grpofit calibrate` learns `reward_seconds` from). The callback's
CUDA counters are stood in for (the run is on CPU); TRL's own profiling is the real one.

Usage (offline; PYTHONPATH as tools/trace/run.sh sets it):
  HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES= PYTHONPATH=/work/trace-env/releases/trl-1.16.0 \\
    /work/trace-env/bin/python tools/trace/reward_timings.py --out calibration/reward-timings/trl-1.16.0.jsonl
"""
import argparse
import asyncio
import importlib.metadata as md
import inspect
import json
import os
import sys
import tempfile
import time
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import tiny  # noqa: E402

SLEEP = 0.05  # a synchronous reward's seconds a call
ASYNC_SLEEP = 0.08  # an async reward's


def accuracy_reward(completions, **kwargs):
    time.sleep(SLEEP)
    return [float(len(c if isinstance(c, str) else str(c))) for c in completions]


async def judge_reward(completions, **kwargs):
    await asyncio.sleep(ASYNC_SLEEP)
    return [0.5] * len(completions)


class StandInCuda:
    """torch.cuda as the callback reads it, on a CPU run."""

    def is_available(self):
        return True

    def mem_get_info(self):
        return (1 << 30, 2 << 30)

    def get_device_name(self):
        return "stand-in (CPU run)"

    def reset_peak_memory_stats(self):
        pass

    def synchronize(self):
        pass

    def max_memory_allocated(self):
        return 1

    def max_memory_reserved(self):
        return 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    import transformers
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    import grpofit_callback

    grpofit_callback.torch = types.SimpleNamespace(cuda=StandInCuda(), __version__=torch.__version__)
    trl_version = md.version("trl")
    major = int(trl_version.split(".")[0])
    work = tempfile.mkdtemp(prefix="reward-timings-")
    policy = os.path.join(work, "qwen2")
    tiny.save("qwen2", policy)
    reward_model = os.path.join(work, "qwen2-reward")
    tiny.save("qwen2", reward_model, head="classification")
    funcs = [accuracy_reward] + ([judge_reward] if major >= 1 else []) + [reward_model]
    args = GRPOConfig(
        output_dir=os.path.join(work, "out"), per_device_train_batch_size=4, num_generations=2,
        max_completion_length=8, max_steps=2, learning_rate=1e-4, beta=0.0, use_cpu=True,
        report_to="none", save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0,
        dataloader_num_workers=0,
    )
    tok = tiny.tokenizer()
    tok.padding_side = "left"
    rm_tok = tiny.tokenizer()
    rm_tok.padding_side = "right"
    model = transformers.AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32) \
        if "dtype" in inspect.signature(transformers.PreTrainedModel.from_pretrained).parameters \
        else transformers.AutoModelForCausalLM.from_pretrained(policy)
    params = inspect.signature(GRPOTrainer.__init__).parameters
    kw = dict(model=model, reward_funcs=funcs, args=args,
              train_dataset=Dataset.from_dict({"prompt": tiny.prompts(16)}),
              callbacks=[grpofit_callback.GrpofitCallback(out)],
              reward_processing_classes=[None] * (len(funcs) - 1) + [rm_tok])
    kw["processing_class" if "processing_class" in params else "tokenizer"] = tok
    if os.path.exists(out):
        os.remove(out)
    GRPOTrainer(**kw).train()
    steps = [json.loads(l) for l in open(out) if json.loads(l)["kind"] == "step"]
    rm_name = ("reward " if trl_version.startswith("0.16.") else "") + "qwen2-reward"
    expected = {"accuracy_reward": "function", rm_name: "model"}
    if major >= 1:
        expected["judge_reward"] = "async"
    for step in steps:
        assert step.get("reward_funcs") == expected, (trl_version, step)
        assert step["trl_timings"]["accuracy_reward"] >= SLEEP, step
        if major >= 1:
            assert step["trl_timings"]["judge_reward"] >= ASYNC_SLEEP, step
    print(f"trl {trl_version}: {len(steps)} steps, reward_funcs {expected}")


if __name__ == "__main__":
    main()
