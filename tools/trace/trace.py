#!/usr/bin/env python3
"""Runs the real `GRPOTrainer.train()` of the TRL release on PYTHONPATH for two optimizer steps on
CPU (bf16 mixed precision, `use_cpu=True`), on tiny random models, and writes one JSON line per
(release, family, knob mix): each phase's high-water mark of live tensor bytes, what autograd
saved by dtype, the logits' dtypes. See tools/trace/README.md.

Usage (through tools/trace/run.sh, which sets PYTHONPATH to the release's folder):
  trace.py --out calibration/cpu-trace/trl-1.15.0.jsonl [--family qwen2] [--mix base ...]
"""
import argparse, contextlib, dataclasses, importlib.metadata as md, inspect, json, os, sys
import tempfile, time, traceback, warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels  # noqa: E402
import memtrack  # noqa: E402
import tiny  # noqa: E402

BASE = dict(per_device_train_batch_size=4, num_generations=2, max_completion_length=32,
            gradient_accumulation_steps=1, max_steps=2, learning_rate=1e-4, beta=0.0,
            gradient_checkpointing=True, bf16=True, use_cpu=True, report_to="none",
            save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0,
            dataloader_num_workers=0)
LORA = dict(r=8, lora_alpha=16, lora_dropout=0.0, task_type="CAUSAL_LM",
            target_modules="all-linear")

# name -> (GRPOConfig overrides, LoRA overrides or None for full fine-tuning, reward model)
MIXES = {
    "base": ({}, {}, False),
    "no_gc": ({"gradient_checkpointing": False}, {}, False),
    "beta": ({"beta": 0.04}, {}, False),
    "iterations2": ({"num_iterations": 2}, {}, False),
    "loss_grpo": ({"loss_type": "grpo"}, {}, False),
    "loss_bnpo": ({"loss_type": "bnpo"}, {}, False),
    "loss_dr_grpo": ({"loss_type": "dr_grpo"}, {}, False),
    "loss_dapo": ({"loss_type": "dapo"}, {}, False),
    "full": ({}, None, False),
    "full_beta": ({"beta": 0.04}, None, False),
    "full_no_gc": ({"gradient_checkpointing": False}, None, False),
    "full_fp32": ({}, None, False),
    "full_fp32_no_gc": ({"gradient_checkpointing": False}, None, False),
    "full_fp32_beta": ({"beta": 0.04}, None, False),
    "modules_to_save": ({}, {"modules_to_save": ["lm_head"]}, False),
    "steps_per_generation2": ({"steps_per_generation": 2, "gradient_accumulation_steps": 2}, {},
                              False),
    # two micro-batches an optimizer step with every weight trained: the first's gradients stay
    # through the second (Trainer._inner_training_loop zeroes them after the optimizer step)
    "full_steps_per_generation2": ({"steps_per_generation": 2, "gradient_accumulation_steps": 2},
                                   None, False),
    "reward_model": ({}, {}, True),
    # the policy loaded with attn_implementation="eager" (transformers `eager_attention_forward`:
    # softmax(QK^T) materialised, in fp32 and cast back, and saved for the backward), as TRL's
    # and Gemma 3's docs recommend for Gemma 3 training
    "eager": ({}, {}, False),
    "eager_no_gc": ({"gradient_checkpointing": False}, {}, False),
    # PEFT's adapter dropout at TRL ModelConfig's default (`lora_dropout` 0.05, trl
    # `trainer/model_config.py`): each adapter drops its own copy of its input in training mode
    # (peft `LoraLayer.update_layer`: `nn.Dropout(p)` where p > 0)
    "dropout": ({}, {"lora_dropout": 0.05}, False),
    "dropout_no_gc": ({"gradient_checkpointing": False}, {"lora_dropout": 0.05}, False),
}
OTHER_FAMILY_MIXES = ["base", "no_gc", "full"]
# mixes whose policy is loaded with attn_implementation="eager" (the others: transformers'
# default, "sdpa"); their records carry `"attn_implementation": "eager"`
EAGER_MIXES = {"eager", "eager_no_gc"}
# mixes whose policy (and the reference model the trainer loads) is float32, as TRL 0.27+ loads a
# model named by path by default (trl 1.15.0 `create_model_from_path`: `kwargs.get("dtype",
# "float32")`, TRL PR #4778), trained under the trainer's bf16 autocast
FP32_MIXES = {"full_fp32", "full_fp32_no_gc", "full_fp32_beta"}
# set when the release refuses `model_init_kwargs` beside a model object (TRL 0.19: "You passed
# `model_init_kwargs` ... already instantiated"): it then loads its reference model in the
# release's default dtype, and the record says so
OBJECT_REFUSES_INIT_KWARGS = [False]


def versions():
    out = {}
    for p in ["trl", "transformers", "peft", "accelerate", "torch"]:
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


class Hooks:
    """Names the phase from the trainer's own calls, for the duration of one run."""

    def __init__(self, phases):
        self.phases = phases
        self.generating = 0
        self.backward = 0
        self.undo = []
        self.forwards = []  # (phase, model class, logits dtype, logits shape)
        self.inputs = []  # input_ids shapes of the forwards
        self.autocast = {}  # "phase model": CPU autocast and its weight-cast cache on at its start

    def patch(self, owner, name, before, after=None):
        orig = getattr(owner, name)

        def wrapper(*a, **k):
            before(a, k)
            try:
                return orig(*a, **k)
            finally:
                if after:
                    after(a, k)
        setattr(owner, name, wrapper)
        self.undo.append(lambda: setattr(owner, name, orig))

    def install(self, trainer_cls):
        from transformers.generation.utils import GenerationMixin
        import accelerate
        from accelerate.optimizer import AcceleratedOptimizer
        ph = self.phases

        def gen_in(a, k):
            self.generating += 1
            ph.enter("generation")

        def gen_out(a, k):
            self.generating -= 1
            ph.enter("after_generation")
        self.patch(GenerationMixin, "generate", gen_in, gen_out)

        def bw_in(a, k):
            self.backward += 1
            ph.enter("backward")

        def bw_out(a, k):
            self.backward -= 1
            ph.enter("after_backward")
            self.saved.backward_done()
        self.patch(accelerate.Accelerator, "backward", bw_in, bw_out)

        def opt_in(a, k):
            ph.enter("optimizer")

        def opt_out(a, k):
            ph.step += 1
            ph.enter("after_optimizer")
        self.patch(AcceleratedOptimizer, "step", opt_in, opt_out)
        for name in ["_calculate_rewards"]:
            if hasattr(trainer_cls, name):
                self.patch(trainer_cls, name, lambda a, k: ph.enter("reward"),
                           lambda a, k: ph.enter("after_reward"))

        from transformers import PreTrainedModel

        def model_class(module):
            # PeftModelForCausalLM too: peft before 0.17 calls the wrapped model's `.forward`
            # directly (`BaseTuner.forward`), which runs no hook of the inner model
            cls = type(module).__name__
            if isinstance(module, PreTrainedModel) or cls.startswith("PeftModel"):
                return cls
            return None

        def pre(module, args):
            cls = model_class(module)
            if cls is None or self.generating or self.backward:
                return
            if "SequenceClassification" in cls:
                ph.enter("reward")
            elif "CausalLM" in cls:
                ph.enter("loss_forward" if torch.is_grad_enabled() else "scoring")
            # the inner model (e.g. Qwen2Model) starts inside accelerate's autocast wrapper of
            # the outer forward, which the outer model's hooks run outside of
            self.autocast[f"{ph.current} {cls}"] = {
                "enabled": torch.is_autocast_enabled("cpu"),
                "cache": torch.is_autocast_cache_enabled()}

        def post(module, args, kwargs, out):
            if model_class(module) is None or self.generating or self.backward:
                return
            ids = kwargs.get("input_ids", args[0] if args else None)
            if isinstance(ids, torch.Tensor):
                self.inputs.append((ph.current, type(module).__name__, list(ids.shape)))
            logits = getattr(out, "logits", None)
            if isinstance(logits, torch.Tensor):
                self.forwards.append((ph.current, type(module).__name__,
                                      memtrack.dtype_name(logits.dtype), list(logits.shape)))
        h1 = torch.nn.modules.module.register_module_forward_pre_hook(pre)
        h2 = torch.nn.modules.module.register_module_forward_hook(post, with_kwargs=True)
        self.undo += [h1.remove, h2.remove]

    def remove(self):
        for u in reversed(self.undo):
            u()


def grpo_args(cls, out_dir, overrides, dtype="bfloat16"):
    fields = {f.name for f in dataclasses.fields(cls)}
    kw = {**BASE, **overrides, "output_dir": out_dir}
    missing = [k for k in overrides if k not in fields]
    if missing:
        return None, missing
    kw = {k: v for k, v in kw.items() if k in fields or k in ("output_dir",)}
    if "model_init_kwargs" in fields and not OBJECT_REFUSES_INIT_KWARGS[0]:
        # what the trainer loads itself (the reference model of full fine-tuning) in bf16, as the
        # policy handed to it: TRL's default is float32 (trl 1.15.0 `create_model_from_path`:
        # `kwargs.get("dtype", "float32")`), older releases transformers' own default
        kw["model_init_kwargs"] = {dtype_key(): dtype}
    if "max_prompt_length" in fields:
        kw["max_prompt_length"] = None
    if "use_vllm" in fields:
        kw["use_vllm"] = False
    return cls(**kw), []


def dtype_key():
    """The key the TRL release on the path reads a dtype from in `model_init_kwargs`."""
    import trl

    root = os.path.dirname(trl.__file__)
    for path in ("trainer/utils.py", "models/utils.py", "trainer/grpo_trainer.py"):
        try:
            text = open(os.path.join(root, path)).read()
        except OSError:
            continue
        if 'get("dtype"' in text:
            return "dtype"
    return "torch_dtype"


def load_bf16(cls, folder, dtype=torch.bfloat16, **kw):
    try:
        return cls.from_pretrained(folder, dtype=dtype, **kw)
    except TypeError:
        return cls.from_pretrained(folder, torch_dtype=dtype, **kw)


def register_all(live, trainer):
    for name in ["model", "ref_model"]:
        m = getattr(trainer, name, None)
        if isinstance(m, torch.nn.Module):
            for t in list(m.parameters()) + list(m.buffers()):
                live.register(t)
    for m in getattr(trainer, "reward_funcs", []) or []:
        if isinstance(m, torch.nn.Module):
            for t in list(m.parameters()) + list(m.buffers()):
                live.register(t)


def amp_cache_off(trainer):
    """Turns off the weight-cast cache of the Trainer's CPU autocast region for a release that
    generates inside `compute_loss` (TRL 0.14). That region (transformers
    `autocast_smart_context_manager`, `use_cpu_amp`) spans the whole step on CPU only (on CUDA it
    is a nullcontext and accelerate's per-forward autocast drops its cache as each forward
    returns): its cache keeps the bf16 casts of the fp32 LoRA weights made under generate's
    no_grad, and the loss's forward reuses them, so the loss has no grad_fn. Off, each forward
    casts anew, as on CUDA. Returns the undo, or None where the release needs nothing."""
    import transformers

    if "generate(" not in inspect.getsource(type(trainer).compute_loss):
        return None
    orig = transformers.Trainer.autocast_smart_context_manager

    def no_cache(self, cache_enabled=True):
        return orig(self, cache_enabled=False)
    transformers.Trainer.autocast_smart_context_manager = no_cache
    return lambda: setattr(transformers.Trainer, "autocast_smart_context_manager", orig)


def reward_len(completions, **kwargs):
    """A reward with variance: the completion's length in characters."""
    return [float(len(c if isinstance(c, str) else str(c))) for c in completions]


def run_one(family, mix, work, fields=None, use_cpu=True):
    """Traces one (family, mix); `fields`: a config.json's fields for the model instead of the
    family's tiny one; `use_cpu=False` runs on the GPU (calibration/measure_trainer.py)."""
    import transformers
    from datasets import Dataset
    import trl
    from trl import GRPOConfig, GRPOTrainer

    overrides, lora, reward_model = MIXES[mix]
    folder = os.path.join(work, family)
    cfg = tiny.save(family, folder, fields=fields) if not os.path.exists(folder) else json.load(
        open(os.path.join(folder, "config.json")))
    if cfg is None:
        return {"skipped": f"transformers {transformers.__version__} has no {family} config class"}
    fp32 = mix in FP32_MIXES
    args, missing = grpo_args(GRPOConfig, os.path.join(work, "out"),
                              {**overrides, **({} if use_cpu else {"use_cpu": False})},
                              "float32" if fp32 else "bfloat16")
    if args is None:
        return {"skipped": f"GRPOConfig has no {missing}"}
    peft_config = None
    if lora is not None:
        from peft import LoraConfig
        peft_config = LoraConfig(**{**LORA, **lora})
    funcs = [reward_len]
    if reward_model:
        params = inspect.signature(GRPOTrainer.__init__).parameters
        rm_folder = os.path.join(work, family + "-reward")
        if not os.path.exists(rm_folder):
            tiny.save(family, rm_folder, head="classification", fields=fields)
        if OBJECT_REFUSES_INIT_KWARGS[0]:
            # the release refuses model_init_kwargs beside a model object (TRL 0.19), so it would
            # load the reward model in transformers' default float32; `trl grpo` hands it
            # ModelConfig's dtype (`model_init_kwargs["torch_dtype"]`). Handed over loaded in
            # bf16, TRL prepares it as the model it would load (`accelerator.prepare_model(...,
            # evaluation_mode=True)`), and `register_all` counts its weights.
            funcs.append(load_bf16(transformers.AutoModelForSequenceClassification, rm_folder))
        else:
            funcs.append(rm_folder)
        if "reward_processing_classes" not in params:
            return {"skipped": "no reward model argument"}
    ds = Dataset.from_dict({"prompt": tiny.prompts(64)})
    # the tokenizer object itself: AutoTokenizer would pick the family's own class from the
    # config (transformers 5 rebuilds Qwen2Tokenizer's byte-level pre-tokenizer)
    tok = tiny.tokenizer()
    tok.padding_side = "left"
    live = memtrack.LiveBytes(tiny.VOCAB)
    phases = memtrack.Phases(live)
    saved = memtrack.SavedBytes(phases)
    hooks = Hooks(phases)
    hooks.saved = saved
    torch.manual_seed(0)
    t0 = time.time()
    with live:
        model = load_bf16(transformers.AutoModelForCausalLM, folder,
                          torch.float32 if fp32 else torch.bfloat16,
                          **({"attn_implementation": "eager"} if mix in EAGER_MIXES else {}))
        for t in list(model.parameters()) + list(model.buffers()):
            live.register(t)
        kw = dict(model=model, reward_funcs=funcs, args=args, train_dataset=ds)
        params = inspect.signature(GRPOTrainer.__init__).parameters
        kw["processing_class" if "processing_class" in params else "tokenizer"] = tok
        if peft_config is not None:
            kw["peft_config"] = peft_config
        if reward_model:
            rm_tok = tiny.tokenizer()
            rm_tok.padding_side = "right"
            kw["reward_processing_classes"] = [None, rm_tok]
        trainer = GRPOTrainer(**kw)
        register_all(live, trainer)
        phases.enter("train_start")
        static = live.total
        hooks.install(type(trainer))
        cache_off = amp_cache_off(trainer)
        try:
            with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
                trainer.train()
        finally:
            hooks.remove()
            phases.close()
            if cache_off:
                cache_off()
    opt = trainer.optimizer
    opt = getattr(opt, "optimizer", opt)
    states = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                 if isinstance(t, torch.Tensor))
    trainable = sum(p.numel() * p.element_size() for p in trainer.model.parameters()
                    if p.requires_grad)
    weights = sum(p.numel() * p.element_size() for p in trainer.model.parameters())
    ref = getattr(trainer, "ref_model", None)
    rewards = [m for m in getattr(trainer, "reward_funcs", []) or [] if isinstance(m, torch.nn.Module)]
    return {
        "reward_model_bytes": sum(p.numel() * p.element_size() for m in rewards
                                  for p in m.parameters()),
        "static_at_train": static,
        "weights_bytes": weights,
        "trainable_bytes": trainable,
        "optimizer_state_bytes": states,
        "reference_model_bytes": sum(p.numel() * p.element_size() for p in ref.parameters())
        if isinstance(ref, torch.nn.Module) else 0,
        "peaks": phases.peaks,
        "at_peak": phases.at_peak,
        "segments": phases.segments,
        "saved_by_dtype": saved.largest,
        "vocab_wide_dtypes": live.vocab_dtypes,
        "forwards": dedupe(hooks.forwards),
        "autocast": hooks.autocast,
        "input_shapes": dedupe(hooks.inputs),
        "config": cfg,
        "seconds": round(time.time() - t0, 1),
        **({"cpu_amp_cache": False} if cache_off else {}),
    }


def dedupe(forwards):
    out = []
    for f in forwards:
        if f not in out:
            out.append(f)
    return out


# torch.utils.checkpoint's warning when reentrant checkpointing gets no input that requires grad
NO_INPUT_GRAD = "None of the inputs have requires_grad=True"


def run_with_workarounds(rec, family, mix, work):
    """Runs one (family, mix), retrying once for each refusal a user of the release meets and
    works around; the record's `note` names each workaround taken."""
    notes = []
    reentrant_off = False
    try:
        for _ in range(3):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("always")
                    seen = []  # (message, the phase it came in)
                    warnings.showwarning = lambda message, *a, **k: seen.append(
                        (str(message), memtrack.Phases.ACTIVE[0].current
                         if memtrack.Phases.ACTIVE[0] else None))
                    result = run_one(family, mix, work)
                rec.update(result)
                # with a trainable head (`modules_to_save`) the loss keeps a grad_fn, and torch's
                # reentrant checkpoint only warns that the checkpointed layers get no gradient
                # (trl issue 2671): the same fault, silent; users fix it the same way. Only in
                # the loss's forward: generation and the no-grad scoring (old log-probs with
                # num_iterations > 1) run the model in train mode, so checkpointed, and torch
                # warns there on every release (`check_backward_validity` in
                # `CheckpointFunction.forward`), though those forwards need no gradient.
                silent = any(NO_INPUT_GRAD in m and phase == "loss_forward" for m, phase in seen)
                if silent and not reentrant_off:
                    raise RuntimeError(f"{NO_INPUT_GRAD} (torch.utils.checkpoint): the "
                                       "checkpointed layers get no gradient, so the loss "
                                       "does not require grad through them")
                break
            except ValueError as e:
                if "model_init_kwargs" not in str(e) or OBJECT_REFUSES_INIT_KWARGS[0]:
                    raise
                OBJECT_REFUSES_INIT_KWARGS[0] = True
            except RuntimeError as e:
                if "does not require grad" not in str(e) or reentrant_off:
                    raise
                # TRL 0.14 / 0.15 wrap the model in PEFT (`get_peft_model` in
                # GRPOTrainer.__init__) before the Trainer turns checkpointing on, so peft's
                # `_prepare_model_for_gradient_checkpointing` skips `enable_input_require_grads`,
                # and transformers' reentrant default (`gradient_checkpointing_enable`:
                # use_reentrant=True) leaves the loss without a grad_fn; TRL 0.16 calls
                # `enable_input_require_grads` itself (`_enable_gradient_checkpointing`).
                # Users of 0.14 / 0.15 set use_reentrant=False (trl issue 3089).
                reentrant_off = True
                MIXES[mix][0]["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
                rec["knobs"]["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
                notes.append(f"retried with use_reentrant=False after: {e}")
        else:
            raise RuntimeError("no run after three tries")
    finally:
        if reentrant_off:
            MIXES[mix][0].pop("gradient_checkpointing_kwargs")
        if OBJECT_REFUSES_INIT_KWARGS[0]:
            notes.insert(0, "no model_init_kwargs (the release refuses them with a model "
                         "object): the reference model in its default dtype")
        if notes:
            rec["note"] = "; ".join(notes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", action="append")
    ap.add_argument("--mix", action="append")
    ap.add_argument("--other-mix", action="append",
                    help=f"the mixes of the families other than qwen2 (default {OTHER_FAMILY_MIXES})")
    a = ap.parse_args()
    torch.set_num_threads(1)
    v = versions()
    v["kernel_stand_ins"] = kernels.install()
    families = a.family or list(tiny.FAMILIES)
    with tempfile.TemporaryDirectory() as work, open(a.out, "a") as out:
        for family in families:
            others = a.other_mix or OTHER_FAMILY_MIXES
            mixes = a.mix or (list(MIXES) if family == "qwen2" else others)
            for mix in mixes:
                overrides, lora, rm = MIXES[mix]
                rec = {"versions": v, "family": family, "mix": mix,
                       "knobs": {**BASE, **overrides}, "lora": None if lora is None else
                       {**LORA, **lora}, "reward_model": rm}
                if mix in FP32_MIXES:
                    rec["dtype"] = "float32"  # the policy's and the loaded reference model's
                if mix in EAGER_MIXES:
                    rec["attn_implementation"] = "eager"
                try:
                    with contextlib.redirect_stdout(sys.stderr):
                        run_with_workarounds(rec, family, mix, work)
                except Exception as e:  # recorded, never hidden: the record says why
                    if "Unknown loss type" in str(e):
                        # a loss type this release does not have: not a failure of the trace
                        rec["skipped"] = f"{type(e).__name__}: {e}"
                    else:
                        rec["error"] = f"{type(e).__name__}: {e}"
                        traceback.print_exc()
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(f"{v['trl']} {family} {mix}: " + (rec.get("error") or rec.get("skipped")
                      or f"peaks {rec['peaks']}"), file=sys.stderr)


if __name__ == "__main__":
    main()
