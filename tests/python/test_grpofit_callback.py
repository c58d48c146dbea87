"""examples/grpofit_callback.py against a stand-in torch.cuda and transformers (no GPU, no torch
install): it writes the documented records, to the file `grpofit run` names.

    python3 -m unittest discover -s tests/python
(tests/loop_cli.rs runs it too.)
"""

import json
import os
import sys
import tempfile
import types
import unittest
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GIB = 1 << 30


class FakeCuda:
    """torch.cuda as the callback uses it: a peak that resets, and mem_get_info."""

    def __init__(self):
        self.allocated = 5 * GIB
        self.reserved = 6 * GIB
        self.resets = 0

    def is_available(self):
        return True

    def mem_get_info(self):
        return (17 * GIB, 24 * GIB)

    def get_device_name(self):
        return "NVIDIA GeForce RTX 4090"

    def reset_peak_memory_stats(self):
        self.resets += 1

    def synchronize(self):
        pass

    def max_memory_allocated(self):
        return self.allocated

    def max_memory_reserved(self):
        return self.reserved


def load_callback(cuda):
    torch = types.ModuleType("torch")
    torch.cuda = cuda
    torch.__version__ = "2.11.0+stand-in"
    torch.nn = types.ModuleType("torch.nn")
    torch.nn.Module = type("Module", (), {})
    transformers = types.ModuleType("transformers")
    transformers.TrainerCallback = type("TrainerCallback", (), {})
    sys.modules["torch"] = torch
    sys.modules["transformers"] = transformers
    sys.path.insert(0, str(EXAMPLES))
    try:
        sys.modules.pop("grpofit_callback", None)
        import grpofit_callback

        return grpofit_callback
    finally:
        sys.path.remove(str(EXAMPLES))


class State:
    def __init__(self, step, main=True):
        self.global_step = step
        self.is_world_process_zero = main


class CallbackTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.saved = {k: os.environ.pop(k, None) for k in ("GRPOFIT_RUN_LOG", "GRPOFIT_LOG")}
        self.cuda = FakeCuda()
        self.module = load_callback(self.cuda)

    def tearDown(self):
        for k, v in self.saved.items():
            if v is not None:
                os.environ[k] = v
            else:
                os.environ.pop(k, None)
        self.dir.cleanup()

    def records(self, path):
        return [json.loads(line) for line in Path(path).read_text().splitlines()]

    def train_two_steps(self, callback, main=True):
        callback.on_train_begin(None, State(0, main), None)
        for step in (1, 2):
            callback.on_step_begin(None, State(step - 1, main), None)
            self.cuda.allocated += GIB
            callback.on_step_end(None, State(step, main), None)

    def test_writes_a_start_line_then_one_step_line_per_step(self):
        path = os.path.join(self.dir.name, "given.jsonl")
        self.train_two_steps(self.module.GrpofitCallback(path))
        start, one, two = self.records(path)
        self.assertEqual(start["kind"], "start")
        self.assertEqual(start["device"], "NVIDIA GeForce RTX 4090")
        self.assertEqual((start["total"], start["free"]), (24 * GIB, 17 * GIB))
        self.assertEqual(start["torch"], "2.11.0+stand-in")
        self.assertEqual([one["kind"], two["kind"]], ["step", "step"])
        self.assertEqual([one["step"], two["step"]], [1, 2])
        self.assertEqual([one["max_allocated"], two["max_allocated"]], [6 * GIB, 7 * GIB])
        self.assertEqual(one["max_reserved"], 6 * GIB)
        self.assertEqual((one["free"], one["total"]), (17 * GIB, 24 * GIB))
        self.assertIsInstance(one["seconds"], float)
        self.assertEqual(self.cuda.resets, 2, "the peak is reset at every step")

    def test_says_so_when_torch_cuda_is_unavailable(self):
        # a run on CPU (or a torch without CUDA) logs nothing: said once, not silent
        import contextlib
        import io

        path = os.path.join(self.dir.name, "none.jsonl")
        self.cuda.is_available = lambda: False
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.train_two_steps(self.module.GrpofitCallback(path))
        self.assertFalse(os.path.exists(path))
        self.assertIn("torch.cuda is not available: no memory is logged to " + path, err.getvalue())
        self.assertEqual(err.getvalue().count("GrpofitCallback"), 1)

    def test_appends_to_the_log_grpofit_run_names(self):
        run_log = os.path.join(self.dir.name, "run.jsonl")
        Path(run_log).write_text('{"kind": "prediction"}\n')
        os.environ["GRPOFIT_RUN_LOG"] = run_log
        os.environ["GRPOFIT_LOG"] = os.path.join(self.dir.name, "other.jsonl")
        self.train_two_steps(self.module.GrpofitCallback())
        kinds = [r["kind"] for r in self.records(run_log)]
        self.assertEqual(kinds, ["prediction", "start", "step", "step"])
        self.assertFalse(os.path.exists(os.environ["GRPOFIT_LOG"]))

    def test_falls_back_to_grpofit_log(self):
        os.environ["GRPOFIT_LOG"] = os.path.join(self.dir.name, "other.jsonl")
        self.assertEqual(self.module.GrpofitCallback().log_path, os.environ["GRPOFIT_LOG"])

    def test_other_ranks_write_nothing(self):
        path = os.path.join(self.dir.name, "rank1.jsonl")
        self.train_two_steps(self.module.GrpofitCallback(path), main=False)
        self.assertFalse(os.path.exists(path))

    def fake_profiling(self, kind):
        """`trl.extras.profiling` as TRL 0.16-0.26 (`function`) or 1.0 on (`class`) writes it."""
        import contextlib

        profiling = types.ModuleType("trl.extras.profiling")
        if kind == "class":

            class ProfilingContext:
                def __init__(self, name):
                    self.name = name

                def __enter__(self):
                    self.started = 0.0
                    return self

                def __exit__(self, *exc):
                    self._log_metrics(0.25)

                def _log_metrics(self, duration):
                    pass

            profiling.ProfilingContext = ProfilingContext
            profiling.profiling_context = lambda trainer, name: ProfilingContext(
                f"{trainer.__class__.__name__}.{name}"
            )
            return profiling, lambda: profiling.profiling_context
        if kind == "function":

            @contextlib.contextmanager
            def profiling_context(trainer, name):
                yield

            profiling.profiling_context = profiling_context
            # the trainer's module imports the name for itself
            trainer_module = types.ModuleType("trl.trainer.grpo_trainer")
            trainer_module.profiling_context = profiling_context
            sys.modules["trl.trainer.grpo_trainer"] = trainer_module
            return profiling, lambda: trainer_module.profiling_context
        raise ValueError(kind)

    def test_steps_carry_trls_own_timings(self):
        for kind in ("class", "function"):
            with self.subTest(kind=kind):
                profiling, context = self.fake_profiling(kind)
                sys.modules["trl.extras.profiling"] = profiling
                # transformers' lazy module: a name looked up imports, and fails where an
                # optional package is missing (torchvision, for trl 1.16's transformers)
                lazy = types.ModuleType("lazy_stand_in")

                def missing(name):
                    raise ModuleNotFoundError("No module named 'torchvision'")

                lazy.__getattr__ = missing
                sys.modules["lazy_stand_in"] = lazy
                try:
                    self.module = load_callback(self.cuda)
                    path = os.path.join(self.dir.name, f"{kind}.jsonl")
                    callback = self.module.GrpofitCallback(path)
                    callback.on_train_begin(None, State(0), None)
                    trainer = type("UnslothGRPOTrainer", (), {})()
                    callback.on_step_begin(None, State(0), None)
                    for name in ("vLLM.generate", "vLLM.generate", "sync_weights"):
                        with context()(trainer, name):
                            pass
                    callback.on_step_end(None, State(1), None)
                    callback.on_step_begin(None, State(1), None)
                    callback.on_step_end(None, State(2), None)
                    _, one, two = self.records(path)
                    timings = one["trl_timings"]
                    self.assertEqual(sorted(timings), ["sync_weights", "vLLM.generate"])
                    if kind == "class":
                        self.assertEqual(timings["vLLM.generate"], 0.5)
                    self.assertNotIn("trl_timings", two, "each step's own timings")
                finally:
                    sys.modules.pop("lazy_stand_in", None)
                    sys.modules.pop("trl.extras.profiling", None)
                    sys.modules.pop("trl.trainer.grpo_trainer", None)
                    self.module._LISTENERS.clear()

    def test_steps_name_the_reward_functions_among_the_timings(self):
        """TRL times each reward function under its name (`_calculate_rewards`); the step line
        says which timings are rewards and of what kind, so that `grpofit calibrate` learns
        `reward_seconds` from the functions alone (a reward model's forward is the GPU's)."""
        for kind in ("class", "function"):
            with self.subTest(kind=kind):
                profiling, context = self.fake_profiling(kind)
                sys.modules["trl.extras.profiling"] = profiling
                try:
                    self.module = load_callback(self.cuda)
                    torch = sys.modules["torch"]

                    def accuracy_reward(prompts, completions, **kwargs):
                        return [1.0] * len(completions)

                    async def judge(prompts, completions, **kwargs):
                        return [0.0] * len(completions)

                    model = torch.nn.Module()
                    model.config = types.SimpleNamespace(_name_or_path="org/Skywork-RM")
                    trainer = type("GRPOTrainer", (), {})()
                    trainer.reward_funcs = [accuracy_reward, judge, model]
                    if kind == "class":  # trl 0.17 on names them; 0.16 names them itself
                        trainer.reward_func_names = ["accuracy_reward", "judge", "Skywork-RM"]
                    path = os.path.join(self.dir.name, f"rewards-{kind}.jsonl")
                    callback = self.module.GrpofitCallback(path)
                    callback.on_train_begin(None, State(0), None)
                    callback.on_step_begin(None, State(0), None)
                    model_name = "Skywork-RM" if kind == "class" else "reward Skywork-RM"
                    for name in ("vLLM.generate", "accuracy_reward", "judge", model_name):
                        with context()(trainer, name):
                            pass
                    callback.on_step_end(None, State(1), None)
                    _, step = self.records(path)
                    self.assertEqual(
                        step["reward_funcs"],
                        {"accuracy_reward": "function", "judge": "async", model_name: "model"},
                    )
                    self.assertIn("accuracy_reward", step["trl_timings"])
                finally:
                    sys.modules.pop("trl.extras.profiling", None)
                    sys.modules.pop("trl.trainer.grpo_trainer", None)
                    self.module._LISTENERS.clear()
                    self.module._REWARD_KINDS.clear()


if __name__ == "__main__":
    unittest.main()
