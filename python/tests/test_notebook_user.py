"""The package as a notebook user meets it (pyqa): each answer against `grpofit ... --json` run
by hand on the same run."""

import json
import os
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


MINE = """# my run: keep this comment
[grpofit]
stack = "trl"
gpu_memory = "24GiB"
max_prompt_length = 256  # my dataset's longest

[model]
model_name_or_path = "Qwen/Qwen2.5-0.5B-Instruct"
dtype = "bfloat16"

[grpo]
per_device_train_batch_size = 4  # keep
num_generations = 4 # four
"""


def test_tables_on_a_run_file_written_back_keep_its_comments(tmp_path):
    # the run was written afresh from the parsed tables: every comment of the user's file was
    # lost on `write(config, force=True)`, and the header named a temporary file
    path = tmp_path / "mine.toml"
    path.write_text(MINE)
    e = grpofit.estimate(config=path, grpo={"num_generations": 2}, lora={"r": 8}, no_gpu=True, offline=True)
    e.write(path, force=True)
    text = path.read_text()
    for kept in ("# my run: keep this comment", "max_prompt_length = 256  # my dataset's longest",
                 "per_device_train_batch_size = 4  # keep", "num_generations = 2 # four"):
        assert kept in text, text
    assert "r = 8" in text and ".grpofit-" not in text, text
    assert f"from {path}'s gpu_memory" in text.split("\n")[0], text
    assert sorted(os.listdir(tmp_path)) == ["mine.toml"]  # no temporary run left beside it
    again = grpofit.estimate(config=path, no_gpu=True, offline=True)
    assert again.json["effective_batch"] == e.json["effective_batch"]
    assert again.total_bytes == e.total_bytes
    # a fit on top of the file, written over it: its changes and the comments
    f = grpofit.fit(config=path, grpo={"max_completion_length": 8192}, gpu_mem="6GiB", no_gpu=True, offline=True)
    assert f.fits and f.changes
    f.write(path, force=True)
    text = path.read_text()
    assert "# my run: keep this comment" in text and "max_completion_length = 8192" in text
    assert grpofit.estimate(config=path, no_gpu=True, offline=True).fits


def test_a_file_the_text_edit_cannot_handle_is_written_afresh_with_every_key(tmp_path):
    # a value over several lines: not edited as text; the run is still whole
    path = tmp_path / "multi.toml"
    path.write_text(MINE.replace('dtype = "bfloat16"', 'dtype = "bfloat16"\ntarget_modules = [\n  "q_proj",\n]'
                                 ).replace("[model]", "[lora]\nr = 4\ntarget_modules = [\n  \"q_proj\",\n]\n\n[model]"
                                           ).replace('dtype = "bfloat16"\ntarget_modules = [\n  "q_proj",\n]', 'dtype = "bfloat16"'))
    e = grpofit.estimate(config=path, lora={"target_modules": ["q_proj", "v_proj"]}, no_gpu=True, offline=True)
    out = tmp_path / "out.toml"
    e.write(out)
    tomllib = pytest.importorskip("tomllib")
    tables = tomllib.loads(out.read_text())
    assert tables["lora"] == {"r": 4, "target_modules": ["q_proj", "v_proj"]}
    assert tables["grpo"]["num_generations"] == 4 and tables["grpofit"]["max_prompt_length"] == 256


def test_bad_log_records_are_named_as_given_not_by_a_temporary_path(tmp_path):
    # records passed as a list are written to a temporary file: the error named that file
    # (gone by the time it is read) and set it as `file`
    run = tmp_path / "mine.toml"
    run.write_text(MINE)
    for records in ([{"a": 1}], []):
        with pytest.raises(grpofit.ConfigError) as caught:
            grpofit.check(records, config=run, offline=True)
        assert str(caught.value).startswith("the log records given"), str(caught.value)
        assert caught.value.file is None and "grpofit-log-" not in str(caught.value)


RECIPE = "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nper_device_train_batch_size: 4\nnum_generations: 4\nmax_completion_length: 256\n"


@pytest.mark.parametrize(
    "extra,fields",
    [
        ("use_peft: true\n", dict(use_peft=True)),  # ModelConfig's r 16, alpha 32, dropout 0.05
        ("", dict()),  # use_peft False, ModelConfig's default: every weight trained
        ("use_peft: true\nlora_r: 32\nlora_dropout: 0.1\n", dict(use_peft=True, lora_r=32, lora_dropout=0.1)),
    ],
    ids=["peft-defaults", "full", "r32"],
)
def test_a_model_config_object_is_the_run_its_trl_recipe_is(tmp_path, ModelConfig, GRPOConfig, extra, fields):
    # a ModelConfig's lora_* fields went into [model] (refused there: "TRL's CLI key"), its
    # defaults were left out (PEFT's r 8 and dropout 0 estimated, not TRL's 16 and 0.05) and
    # its use_peft=False default was left out (LoRA estimated, not full fine-tuning)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE + extra)
    common = dict(gpu_mem="16GiB", no_gpu=True, offline=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", grpofit.GrpofitNote)
        from_recipe = grpofit.estimate(config=recipe, **common)
        from_objects = grpofit.estimate(
            model=ModelConfig(model_name_or_path="Qwen/Qwen2.5-0.5B-Instruct", **fields),
            grpo=GRPOConfig(per_device_train_batch_size=4, num_generations=4, max_completion_length=256),
            **common,
        )
    assert from_objects.components == from_recipe.components
    assert from_objects.total_bytes == from_recipe.total_bytes


def test_the_packages_adapter_keys_are_the_binarys():
    # python/grpofit/_runfile.py MODEL_LORA_KEYS copies grpofit-core's: held to it here
    import re

    from grpofit import _runfile

    source = (ROOT / "crates" / "grpofit-core" / "src" / "config" / "source.rs").read_text()
    block = source.split("pub const MODEL_LORA_KEYS")[1].split("];")[0]
    assert tuple(re.findall(r'\("(\w+)", "(\w+)"\)', block)) == _runfile.MODEL_LORA_KEYS
