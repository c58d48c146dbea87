"""The package as a notebook user meets it (pyqa): each answer against `grpofit ... --json` run
by hand on the same run."""

import json
import subprocess
import sys
import warnings

import pytest

import grpofit
from conftest import ROOT

QUIET = ["--no-gpu", "--offline"]
OOM = str(ROOT / "tests" / "oom" / "torch-2.5-other-process.txt")


def _json(args):
    done = subprocess.run([grpofit.binary(), *args, "--json"], capture_output=True, text=True)
    assert done.returncode in (0, 3), done.stderr
    return json.loads(done.stdout)


CASES = [
    (lambda: grpofit.estimate(preset="24gb", no_gpu=True, offline=True), ["estimate", "--preset", "24gb", *QUIET]),
    (
        lambda: grpofit.fit(preset="24gb", fastest=True, gpu="H100", no_gpu=True, offline=True),
        ["fit", "--preset", "24gb", "--fastest", "--gpu", "H100", *QUIET],
    ),
    (lambda: grpofit.diagnose(OOM, preset="24gb", offline=True), ["diagnose", OOM, "--preset", "24gb", "--offline"]),
]


@pytest.mark.parametrize("call,args", CASES, ids=["estimate", "fit-fastest", "diagnose"])
def test_every_json_field_is_an_attribute_with_the_binarys_value(call, args):
    # `fits_with_headroom`, `nearest_changes`, a diagnosis's `allocated_bytes`... were in
    # `.json` only: `e.fits_with_headroom` was an AttributeError
    answer, expected = call(), _json(args)
    for key, value in expected.items():
        if key == "estimate":  # the fit's run, an Estimate of its own
            assert answer.estimate.json == value
            continue
        assert getattr(answer, key) == value, key
        assert key in dir(answer)
    with pytest.raises(AttributeError):
        answer.no_such_field


def test_the_binarys_notes_on_a_recipe_reach_the_notebook_as_warnings(tmp_path):
    # `use_peft` without `lora_dropout`: TRL's 0.05 default is modelled, and the binary says
    # so on standard error only, which the package captured and dropped
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nuse_peft: true\nlora_r: 16\n"
        "per_device_train_batch_size: 4\nnum_generations: 4\nmax_completion_length: 256\n"
    )
    with pytest.warns(grpofit.GrpofitNote) as said:
        e = grpofit.estimate(config=recipe, gpu_mem="16GiB", gpu="T4", no_gpu=True, offline=True)
    notes = [str(w.message) for w in said]
    assert any("lora_dropout" in n and "0.05" in n and "recipe.yaml" in n for n in notes), notes
    assert all(w.filename == __file__ for w in said), [w.filename for w in said]
    # bf16 on a T4 (TRL 1.x computes in bf16 by default): a warning of the JSON's, kept there
    assert any("T4" in w and "bf16" in w for w in e.warnings), e.warnings
    # a run that states its dropout has no such note
    recipe.write_text(recipe.read_text() + "lora_dropout: 0.0\nmax_prompt_length: 256\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", grpofit.GrpofitNote)
        grpofit.estimate(config=recipe, gpu_mem="16GiB", no_gpu=True, offline=True)


NO_TORCH = """
import sys
sys.modules["{blocked}"] = None  # not installed, whatever this machine has
try:
    from grpofit import GrpofitCallback
except ImportError as e:
    print(type(e).__name__, e.name, e)
"""


@pytest.mark.parametrize("blocked", ["torch", "transformers"])
def test_the_callback_without_torch_says_what_it_needs(blocked):
    # was the exec'd callback's bare "No module named 'torch'" from a file named
    # "grpofit_callback.py (grpofit callback -o -)"
    code = NO_TORCH.format(blocked=blocked)
    if blocked == "transformers":  # torch present (a stand-in), transformers not
        code = "import sys, types; sys.modules['torch'] = types.ModuleType('torch')" + code
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ModuleNotFoundError {blocked} "), done.stdout
    assert "GrpofitCallback" in done.stdout and "pip install torch transformers" in done.stdout
