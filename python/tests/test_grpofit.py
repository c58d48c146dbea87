"""The grpofit Python package against the installed binary (tools/wheel/ci.sh installs the
wheel into a fresh virtual environment and runs these):

    pytest python/tests
"""

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import grpofit
from conftest import ROOT

GIB = 1 << 30
# no NVML reading and no Hub: the answers are the same on any machine
QUIET = dict(no_gpu=True, offline=True)


def test_the_binary_is_on_path_and_is_the_one_the_package_runs():
    on_path = shutil.which("grpofit")
    assert on_path, "the wheel puts `grpofit` on PATH"
    assert os.path.samefile(grpofit.binary(), on_path) or os.environ.get("GRPOFIT_BINARY")
    done = subprocess.run([on_path, "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("grpofit ")


# a finder that refuses the heavy packages: importing grpofit, and estimating, must not need them
NO_TORCH = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers", "trl", "peft", "unsloth", "vllm"):
            raise ImportError(f"{name} refused by the test")
sys.meta_path.insert(0, Refuse())
import grpofit
e = grpofit.estimate(preset="24gb", no_gpu=True, offline=True)
assert e.fits, e
print("ok", sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers")))
"""


def test_import_and_estimate_without_torch_or_transformers():
    done = subprocess.run([sys.executable, "-c", NO_TORCH], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok []"


def test_estimate_on_a_preset_has_the_json_fields_and_they_add_up():
    e = grpofit.estimate(preset="24gb", **QUIET)
    assert e.fits is True
    # the 24gb preset's gpu_memory: an RTX 4090's CUDA total (presets/24gb.toml)
    assert e.capacity_bytes == 25_377_898_496
    assert sum(c["bytes"] for c in e.components) == e.total_bytes
    assert e.headroom_bytes == e.capacity_bytes - e.total_bytes
    assert e.json["total_bytes"] == e.total_bytes
    assert {r["role"] for r in e.roles} == {"training"}
    assert "LoRA adapters" in str(e) and "headroom" in str(e)


def test_the_notebook_view_is_the_binarys_svg_with_the_jsons_numbers():
    e = grpofit.estimate(preset="24gb", **QUIET)
    html = e._repr_html_()
    assert "<svg" in html and "</svg>" in html
    drawn = {int(b) for b in re.findall(r'data-bytes="(\d+)"', e.svg)}
    for phase in e.roles[0]["phases"]:
        assert phase["total_bytes"] in drawn
        for c in phase["components"]:
            assert c["bytes"] in drawn, c["name"]
    assert e.capacity_bytes in drawn


def test_estimate_on_a_file_is_the_estimate_of_its_run(tmp_path):
    preset = grpofit.estimate(preset="24gb", **QUIET)
    path = tmp_path / "run.toml"
    preset.write(path)
    assert "[grpo]" in path.read_text()
    again = grpofit.estimate(config=path, **QUIET)
    assert again.total_bytes == preset.total_bytes
    assert again.capacity_bytes == preset.capacity_bytes


def test_a_run_given_as_tables_is_the_run_of_that_file(tmp_path):
    tomllib = pytest.importorskip("tomllib")
    preset = grpofit.estimate(preset="24gb", **QUIET)
    tables = tomllib.loads(preset.to_toml())
    assert grpofit.estimate(config=tables, **QUIET).total_bytes == preset.total_bytes
    # on top of a file: its tables, with the dict's keys replaced
    path = tmp_path / "run.toml"
    preset.write(path)
    shorter = grpofit.estimate(config=path, grpo={"max_completion_length": 256}, **QUIET)
    assert shorter.total_bytes < preset.total_bytes


def test_dicts_update_the_presets_tables():
    base = grpofit.estimate(preset="24gb", **QUIET)
    longer = grpofit.estimate(
        preset="24gb", grpo={"max_completion_length": 1536}, model={"max_seq_length": 2048}, **QUIET
    )
    assert longer.total_bytes > base.total_bytes


def test_does_not_fit_is_an_answer_unless_check_is_asked():
    small = grpofit.estimate(preset="24gb", gpu_mem="8GiB", **QUIET)
    assert small.fits is False and small.headroom_bytes < 0
    with pytest.raises(grpofit.DoesNotFit) as caught:
        grpofit.estimate(preset="24gb", gpu_mem=8 * GIB, check=True, **QUIET)
    assert caught.value.result.total_bytes == small.total_bytes


def test_fit_writes_a_run_that_fits(tmp_path):
    fitted = grpofit.fit(preset="24gb", gpu_mem="12GiB", **QUIET)
    assert fitted.fits and fitted.outcome in ("fitted", "already_fits")
    assert fitted.estimate.total_bytes <= 12 * GIB
    assert "<svg" in fitted._repr_html_()
    path = tmp_path / "fitted.toml"
    fitted.write(path)
    assert grpofit.estimate(config=path, gpu_mem="12GiB", **QUIET).fits


def test_the_estimate_carries_the_step_time_on_the_card_named():
    e = grpofit.estimate(preset="24gb", gpu="H100", **QUIET)
    assert e.step_time["gpu"]["name"] == "H100 SXM"
    assert [p["phase"] for p in e.step_time["phases"]] == ["generation", "weight_sync", "scoring", "rewards", "training"]
    assert abs(sum(p["seconds"] for p in e.step_time["phases"]) - e.step_time["seconds"]) < 1e-9
    assert "on H100 SXM" in repr(e) and "step ≈" in str(e)
    slower = grpofit.estimate(preset="24gb", gpu="A10G", **QUIET)
    assert slower.step_time["seconds"] > 2 * e.step_time["seconds"]


def test_fit_fastest_is_no_slower_than_the_nearest_fit(tmp_path):
    fast = grpofit.fit(preset="80gb", fastest=True, **QUIET)
    assert fast.outcome == "fastest" and fast.fits
    assert fast.step_time["seconds"] <= fast.nearest_seconds
    assert fast.speedup >= 1.0
    assert all("seconds_saved" in c and "bytes_saved" in c for c in fast.changes)
    path = tmp_path / "fast.toml"
    fast.write(path)
    assert grpofit.estimate(config=path, **QUIET).fits


def test_fit_keeps_the_headroom_asked_for_on_top_of_tables():
    roomy = grpofit.fit(preset="24gb", gpu_mem="12GiB", headroom=20, grpo={"num_generations": 8}, **QUIET)
    assert roomy.fits and roomy.estimate.total_bytes <= 0.8 * 12 * GIB
    assert "keeping 20% free" in str(roomy)


def test_fit_with_check_raises_when_nothing_fits():
    hopeless = grpofit.fit(preset="141gb", gpu_mem="2GiB", **QUIET)
    assert hopeless.fits is False and hopeless.floors
    with pytest.raises(ValueError):
        hopeless.to_toml()
    with pytest.raises(grpofit.DoesNotFit):
        grpofit.fit(preset="141gb", gpu_mem="2GiB", check=True, **QUIET)


def test_diagnose_reads_a_log_by_path_and_by_text():
    log = ROOT / "tests" / "oom" / "torch-2.5-other-process.txt"
    by_path = grpofit.diagnose(log)
    by_text = grpofit.diagnose(log.read_text())
    assert by_path.requested_bytes == 3 * GIB
    assert by_path.verdict == by_text.verdict and by_path.verdict
    assert by_path.fits is None
    assert "verdict" in str(by_path)
    with_run = grpofit.diagnose(log, preset="24gb", offline=True)
    assert with_run.fit is not None and with_run.fits in (True, False)
    assert "<svg" in with_run._repr_html_() and "<svg" not in by_path._repr_html_()


def test_check_sets_a_measured_log_against_the_estimate():
    total = 24 * GIB
    records = [
        {"kind": "start", "device": "NVIDIA GeForce RTX 4090", "total": total, "torch": "2.9.0"},
        {
            "kind": "step",
            "step": 1,
            "max_allocated": 9 * GIB,
            "max_reserved": 10 * GIB,
            "free": total - 13 * GIB,
            "total": total,
            "seconds": 9.5,
        },
    ]
    checked = grpofit.check(records, preset="24gb", offline=True)
    assert checked.steps == 1 and checked.capacity_bytes == total
    assert [r["measured_bytes"] for r in checked.rows][:2] == [9 * GIB, 10 * GIB]
    assert checked.fits is True
    assert "<svg" in checked._repr_html_() and "measured" in checked.svg
    assert "predicted" in str(checked)


def test_config_error_names_the_table_key_value_and_line():
    with pytest.raises(grpofit.ConfigError) as caught:
        grpofit.estimate(preset="24gb", grpo={"per_device_train_batch_size": 0}, **QUIET)
    e = caught.value
    assert (e.table, e.key, e.value) == ("grpo", "per_device_train_batch_size", "0")
    assert isinstance(e.line, int) and "per_device_train_batch_size = 0" in e.run_toml
    assert "grpofit-" not in str(e), "the temporary path is named for what it is"
    with pytest.raises(grpofit.ConfigError) as caught:
        grpofit.estimate(preset="24gb", lora={"lora_alpah": 16}, **QUIET)
    assert caught.value.key == "lora_alpah" and "did you mean" in str(caught.value)
    with pytest.raises(grpofit.ConfigError) as caught:
        grpofit.estimate(config=ROOT / "no-such-run.toml", **QUIET)
    assert caught.value.file.endswith("no-such-run.toml")


# the stand-ins of conftest.py: the pinned contract's fields and defaults, nothing hand-written


def test_trainer_objects_are_read_as_the_keywords_they_set(GRPOConfig, LoraConfig, ModelConfig):
    model = ModelConfig(model_name_or_path="Qwen/Qwen2.5-1.5B-Instruct", dtype="bfloat16")
    # PEFT keeps target_modules as a set
    lora = LoraConfig(r=16, lora_alpha=32, target_modules={"q_proj", "k_proj", "v_proj", "o_proj"})
    grpo = GRPOConfig(
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=512,
        use_vllm=True,
        vllm_mode="colocate",
        bf16=True,
    )
    # what GRPOConfig.__post_init__ derives when neither is given (trl 1.15.0)
    grpo.steps_per_generation = grpo.gradient_accumulation_steps
    grpo.generation_batch_size = grpo.per_device_train_batch_size * grpo.steps_per_generation
    objects = grpofit.estimate(model=model, lora=lora, grpo=grpo, gpu_mem="24GiB", **QUIET)
    as_dicts = grpofit.estimate(
        model={"model_name_or_path": "Qwen/Qwen2.5-1.5B-Instruct", "dtype": "bfloat16"},
        lora={"r": 16, "lora_alpha": 32, "target_modules": ["k_proj", "o_proj", "q_proj", "v_proj"]},
        grpo={
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 512,
            "use_vllm": True,
            "vllm_mode": "colocate",
            "bf16": True,
        },
        stack="trl",
        gpu_mem="24GiB",
        **QUIET,
    )
    assert objects.total_bytes == as_dicts.total_bytes
    assert "trl stack" in str(objects)
    toml = objects.to_toml()
    assert "generation_batch_size" not in toml and "lora_alpha = 32" in toml


def test_an_object_replaces_its_table_and_its_defaults_are_the_trainers(GRPOConfig):
    defaults = GRPOConfig()
    from grpofit._runfile import keyword_arguments

    assert keyword_arguments(defaults, "grpo") == {}
    changed = GRPOConfig(num_generations=16)
    assert keyword_arguments(changed, "grpo") == {"num_generations": 16}
    with pytest.raises(TypeError):
        keyword_arguments(object(), "grpo")


def test_versions_pin_the_trainers_and_nothing_else():
    old = grpofit.estimate(preset="24gb", versions={"vllm": "0.11.0", "trl": "0.19.1"}, **QUIET)
    assert old.total_bytes > 0
    used = {v["package"]: v["version"] for v in old.versions}
    assert used["trl"] == "0.19.1", old.versions
    with pytest.raises(grpofit.ConfigError) as e:
        grpofit.estimate(preset="24gb", versions={"peft": "0.15.0"}, **QUIET)
    assert "peft" in str(e.value)
    # a release outside the modelled range is refused by the binary, with the key
    with pytest.raises(grpofit.ConfigError) as e:
        grpofit.estimate(preset="24gb", versions={"trl": "0.9.0"}, **QUIET)
    assert "trl_version" in str(e.value)


# a stand-in torch and transformers, as tests/python/test_grpofit_callback.py builds them
CALLBACK = """
import sys, types
torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(is_available=lambda: False)
torch.__version__ = "0"
transformers = types.ModuleType("transformers")
transformers.TrainerCallback = type("TrainerCallback", (), {})
sys.modules.update(torch=torch, transformers=transformers)
import grpofit
from grpofit import GrpofitCallback
assert issubclass(GrpofitCallback, transformers.TrainerCallback)
assert GrpofitCallback.__module__ == "grpofit.callback"
sys.stdout.write(sys.modules["grpofit.callback"]._SOURCE)
"""


def test_the_callback_is_the_one_grpofit_callback_writes():
    done = subprocess.run([sys.executable, "-c", CALLBACK], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    written = subprocess.run(
        [grpofit.binary(), "callback", "-o", "-"], capture_output=True, text=True, check=True
    )
    assert done.stdout == written.stdout
    assert done.stdout == (ROOT / "examples" / "grpofit_callback.py").read_text()


def test_the_wheel_is_manylinux2014_or_older():
    wheels = sorted((ROOT / "target" / "wheels").glob("grpofit-*.whl"))
    wheel = os.environ.get("GRPOFIT_WHEEL") or (str(wheels[-1]) if wheels else None)
    if not wheel:
        pytest.skip("no wheel built (tools/wheel/ci.sh builds one)")
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
        tags = [
            line.split(": ", 1)[1] for line in z.read(name).decode().splitlines() if line.startswith("Tag: ")
        ]
        assert any(n.endswith("/grpofit") and ".data/scripts/" in n for n in z.namelist())
    assert tags
    for tag in tags:
        platform = tag.split("-")[2]
        glibc = re.match(r"manylinux_(\d+)_(\d+)_", platform)
        legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
        old = legacy.get(platform.split("_x86_64")[0].split("_aarch64")[0])
        version = (int(glibc[1]), int(glibc[2])) if glibc else old
        assert version is not None and version <= (2, 17), tag


def test_the_run_file_writer_round_trips_through_a_toml_reader():
    tomllib = pytest.importorskip("tomllib")
    from grpofit._runfile import table_of, to_toml

    class Mode(__import__("enum").Enum):
        COLOCATE = "colocate"

    given = {
        "s": 'quote " backslash \\ newline \n tab \t é',
        "n": 3,
        "f": 0.45,
        "b": False,
        "modules": {"v_proj", "q_proj"},
        "mode": Mode.COLOCATE,
        "kwargs": {"use_reentrant": False, "odd key": [1, 2]},
        "none": None,
    }
    tables = {"grpo": table_of(given, "grpo"), "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}
    read = tomllib.loads(to_toml(tables))
    assert read["grpo"] == {
        "s": given["s"],
        "n": 3,
        "f": 0.45,
        "b": False,
        "modules": ["q_proj", "v_proj"],
        "mode": "colocate",
        "kwargs": {"use_reentrant": False, "odd key": [1, 2]},
    }
    assert read["env"] == tables["env"]
    with pytest.warns(UserWarning, match=r"\[grpo\] thing"):
        assert table_of({"thing": object()}, "grpo") == {}


def test_the_estimate_names_the_attention_it_assumed():
    # the 24gb preset is Unsloth's, whose step follows Unsloth's own attention
    assert grpofit.estimate(preset="24gb", **QUIET).attention is None
    model = {"model_name_or_path": "Qwen/Qwen2.5-1.5B-Instruct", "dtype": "bfloat16"}
    tables = {
        "grpofit": {"stack": "trl", "max_prompt_length": 512, "gpu_memory": "24GiB"},
        "model": model,
        "lora": {"r": 16},
        "grpo": {"per_device_train_batch_size": 8, "num_generations": 8, "use_vllm": False},
    }
    sdpa = grpofit.estimate(config=tables, **QUIET)
    assert sdpa.attention == "sdpa"
    eager = grpofit.estimate(config=tables, model={**model, "attn_implementation": "eager"}, **QUIET)
    assert eager.attention == "eager"
    assert eager.training_peak_allocated_bytes > sdpa.training_peak_allocated_bytes


def test_the_batch_is_what_unsloth_runs_where_it_raises_the_micro_batch(tmp_path):
    # unsloth#3572: 1 completion per device with 6 generations runs a micro-batch of 6
    notebook = (ROOT / "tests" / "fixtures" / "journeys" / "unsloth-notebook.toml").read_text()
    path = tmp_path / "run.toml"
    path.write_text(notebook.replace("num_generations = 4", "num_generations = 6"))
    est = grpofit.estimate(config=path, gpu_mem="24GiB", **QUIET)
    assert (est.effective_batch, est.prompts_per_step, est.running_micro_batch) == (6, 1.0, 6)
    assert est.effective_batch_as_written == 1
    assert est.prompts_per_step_as_written == pytest.approx(1 / 6)
    path.write_text(notebook.replace("per_device_train_batch_size = 1", "per_device_train_batch_size = 4"))
    kept = grpofit.estimate(config=path, gpu_mem="24GiB", **QUIET)
    assert kept.effective_batch == 4 and kept.effective_batch_as_written is None
