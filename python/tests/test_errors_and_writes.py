"""The package as a new user meets it: its own errors (a missing binary, a missing log, a bad
argument), its version from a checkout, `write` that never truncates, and strings that reach
the run file through a real TOML writer (issues 27 and 28)."""

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import grpofit
from conftest import ROOT

QUIET = dict(no_gpu=True, offline=True)
PYTHON_DIR = ROOT / "python"


def _run_python(code: str, env=None, flags=()):
    done = subprocess.run(
        [sys.executable, *flags, "-c", code], capture_output=True, text=True, env=env
    )
    return done


# --- a missing binary -------------------------------------------------------------------------

NOT_FOUND = """
import sys, sysconfig
sysconfig.get_path = lambda *a, **k: {scripts!r}
import grpofit
try:
    grpofit.estimate(preset="24gb", no_gpu=True, offline=True)
except grpofit.BinaryNotFound as e:
    assert isinstance(e, grpofit.GrpofitError) and isinstance(e, FileNotFoundError)
    print("raised:", e)
"""


@pytest.mark.parametrize("named", [None, "/nonexistent/grpofit", "DIRECTORY"])
def test_a_missing_binary_raises_the_packages_error_naming_pip_install(tmp_path, named):
    env = {k: v for k, v in os.environ.items() if k != "GRPOFIT_BINARY"}
    env["PATH"] = str(tmp_path)  # nothing there
    if named is not None:
        env["GRPOFIT_BINARY"] = str(tmp_path) if named == "DIRECTORY" else named
    done = _run_python(NOT_FOUND.format(scripts=str(tmp_path)), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("raised:") and "pip install grpofit" in done.stdout, done.stdout


# --- diagnose on a missing file ---------------------------------------------------------------


def test_diagnose_on_a_missing_file_says_it_is_missing(tmp_path):
    for missing in ("missing.log", str(tmp_path / "train.log"), tmp_path / "gone.txt", "no_such_file"):
        with pytest.raises(grpofit.LogNotFound, match="no such file") as caught:
            grpofit.diagnose(missing)
        assert isinstance(caught.value, FileNotFoundError)
        assert str(missing) in str(caught.value)
    with pytest.raises(grpofit.LogNotFound):
        grpofit.check(tmp_path / "grpofit-run.jsonl", preset="24gb")
    # a message on one line is still a message
    line = (ROOT / "tests" / "oom" / "torch-2.5-other-process.txt").read_text().strip()
    assert "\n" not in line
    assert grpofit.diagnose(line).requested_bytes == 3 << 30


# --- the version ------------------------------------------------------------------------------


def _workspace_version() -> str:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]


def test_the_version_is_the_workspaces_installed_or_from_a_checkout():
    assert grpofit.__version__ == _workspace_version()
    # a checkout, no distribution installed: -S leaves site-packages (the wheel's) off sys.path
    code = f"import sys; sys.path.insert(0, {str(PYTHON_DIR)!r}); import grpofit; print(grpofit.__version__)"
    done = _run_python(code, flags=("-S", "-I"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == _workspace_version()


# --- ConfigError.file -------------------------------------------------------------------------


def test_config_error_file_is_a_path_and_nothing_else(tmp_path):
    bad = tmp_path / "bad run.toml"
    text = (ROOT / "presets" / "24gb.toml").read_text().replace("beta = 0.0", "beta = -1", 1)
    assert "beta = -1" in text
    bad.write_text(text)
    with pytest.raises(grpofit.ConfigError) as caught:
        grpofit.estimate(config=bad, **QUIET)
    e = caught.value
    assert e.file == str(bad) and isinstance(e.line, int), (e.file, e.line, str(e))
    assert text.splitlines()[e.line - 1].startswith("beta")
    # the run the package wrote from the arguments is no file of the user's
    with pytest.raises(grpofit.ConfigError) as caught:
        grpofit.estimate(preset="24gb", grpo={"beta": -1}, **QUIET)
    assert caught.value.file is None and isinstance(caught.value.line, int)
    assert caught.value.key == "beta"
    # a preset's name is not a file
    with pytest.raises(grpofit.ConfigError) as caught:
        grpofit.estimate(preset="no-such-tier", **QUIET)
    assert caught.value.file is None and "unknown preset" in str(caught.value)


# --- write never truncates --------------------------------------------------------------------


def test_write_refuses_an_existing_file_unless_forced(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("# mine\n")
    e = grpofit.estimate(preset="24gb", **QUIET)
    with pytest.raises(grpofit.FileExists):
        e.write(path)
    assert path.read_text() == "# mine\n"
    assert isinstance(grpofit.FileExists("x"), FileExistsError)
    e.write(path, force=True)
    assert grpofit.estimate(config=path, **QUIET).total_bytes == e.total_bytes


def test_a_fit_written_over_the_file_it_read_leaves_a_complete_file(tmp_path):
    path = tmp_path / "run.toml"
    grpofit.estimate(preset="24gb", **QUIET).write(path)
    text = path.read_text().replace("[grpo]\n", "[grpo]\n# my note on the batch\n", 1)
    assert "# my note" in text
    path.write_text(text)
    fitted = grpofit.fit(config=path, gpu_mem="12GiB", **QUIET)
    assert fitted.fits and fitted.changes
    fitted.write(path, force=True)
    written = path.read_text()
    assert "# my note on the batch" in written, "the file is edited in place, comments kept"
    again = grpofit.estimate(config=path, gpu_mem="12GiB", **QUIET)
    assert again.total_bytes == fitted.estimate.total_bytes
    # and the same from a run given as tables
    other = tmp_path / "tables.toml"
    grpofit.fit(preset="24gb", gpu_mem="12GiB", grpo={"num_generations": 8}, **QUIET).write(other)
    assert grpofit.estimate(config=other, gpu_mem="12GiB", **QUIET).fits


def test_a_path_that_looks_like_a_flag_is_written_as_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    grpofit.estimate(preset="24gb", **QUIET).write("-")
    assert (tmp_path / "-").read_text().count("[grpo]") == 1


# --- strings through a real TOML writer -------------------------------------------------------

HOSTILE = [
    "🚀 emoji",
    "é ü 漢字 \u2028 line separator",
    'quote " and \'single\'',
    "back\\slash \\u0041 \\n not an escape",
    "'''",
    '"""',
    "tab\t newline\n cr\r form\f backspace\b",
    "nul \x00 bell \x07 esc \x1b del \x7f",
    "[table] = 1\n[grpo]\nbeta = 9",
    "",
]


def test_hostile_strings_round_trip_through_the_run_file_writer():
    tomllib = pytest.importorskip("tomllib")
    from grpofit._runfile import to_toml

    rng = random.Random(27)
    alphabet = "".join(HOSTILE) + "abc=#"
    cases = list(HOSTILE) + ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40))) for _ in range(300)]
    for case in cases:
        tables = {"env": {"NOTE": case, case or "empty": [case, {"k": case}]}}
        read = tomllib.loads(to_toml(tables))
        assert read == tables, repr(case)


def test_a_lone_surrogate_is_the_packages_argument_error():
    from grpofit._runfile import to_toml

    with pytest.raises(grpofit.ArgumentError, match="surrogate"):
        to_toml({"env": {"NOTE": "half a pair \ud83d"}})


def test_an_emoji_reaches_the_binary_as_valid_toml(tmp_path):
    tomllib = pytest.importorskip("tomllib")
    note = 'launched 🚀 by "me" \\ é'
    e = grpofit.estimate(preset="24gb", config=None, model={"model_name": "unsloth/Qwen2.5-3B-Instruct"},
                         grpo={"output_dir": note}, **QUIET)
    path = tmp_path / "run.toml"
    e.write(path)
    assert tomllib.loads(path.read_text(encoding="utf-8"))["grpo"]["output_dir"] == note


# --- argument errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: grpofit.estimate(config=42, **QUIET),
        lambda: grpofit.estimate(preset=["24gb"], **QUIET),
        lambda: grpofit.estimate(preset="24gb", gpu_mem=[24], **QUIET),
        lambda: grpofit.estimate(preset="24gb", gpu_mem=True, **QUIET),
        lambda: grpofit.estimate(preset="24gb", grpo=object(), **QUIET),
        lambda: grpofit.estimate(preset="24gb", versions=["trl"], **QUIET),
        lambda: grpofit.fit(preset="24gb", headroom="5%", **QUIET),
        lambda: grpofit.check(42, preset="24gb"),
        lambda: grpofit.diagnose(3.5),
        lambda: grpofit.estimate(preset="24gb", **QUIET).write(7),
    ],
)
def test_a_wrong_type_is_the_packages_argument_error(call):
    with pytest.raises(grpofit.ArgumentTypeError) as caught:
        call()
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, grpofit.GrpofitError)


def test_a_wrong_value_is_the_packages_argument_error():
    with pytest.raises(grpofit.ArgumentError, match="stack") as caught:
        grpofit.estimate(preset="24gb", stack="tensorflow", **QUIET)
    assert isinstance(caught.value, ValueError)
    with pytest.raises(grpofit.ArgumentError, match="64-bit"):
        grpofit.estimate(preset="24gb", grpo={"seed": 1 << 64}, **QUIET)


@pytest.mark.parametrize(
    "kwargs, said",
    [
        (dict(gpu_mem="24"), "gpu_mem='24': add a unit"),
        (dict(gpu_mem="-5GiB"), "gpu_mem='-5GiB': a size cannot be negative"),
        (dict(gpu="RTX 9090"), "gpu='RTX 9090': the card `RTX 9090` is not in grpofit's table"),
    ],
)
def test_a_bad_value_is_named_as_the_caller_passed_it(kwargs, said):
    """The binary names its flag (`--gpu-mem 24: add a unit`); the caller passed `gpu_mem`."""
    with pytest.raises(grpofit.ConfigError) as caught:
        grpofit.estimate(preset="24gb", **kwargs, **QUIET)
    assert str(caught.value).startswith(said), str(caught.value)
    assert "--gpu" not in str(caught.value).split(":")[0]


# --- tables on top of a run file the package cannot read itself (pyqa) -------------------------


def test_tables_on_a_missing_or_broken_run_file_are_the_binarys_config_error(tmp_path):
    # the package reads the file to put the tables on top: a missing file or bad TOML was
    # Python's FileNotFoundError / TOMLDecodeError, not a GrpofitError naming file and line
    missing = tmp_path / "missing.toml"
    with pytest.raises(grpofit.ConfigError) as caught:
        grpofit.estimate(config=missing, grpo={"num_generations": 8}, gpu_mem="24GiB", **QUIET)
    assert caught.value.file == str(missing) and "cannot read" in str(caught.value)
    broken = tmp_path / "broken.toml"
    broken.write_text('[model]\nmodel_name_or_path = "Qwen/Qwen2.5-0.5B-Instruct"\n[grpo\n')
    with pytest.raises(grpofit.ConfigError) as caught:
        grpofit.estimate(config=broken, grpo={"num_generations": 8}, gpu_mem="24GiB", **QUIET)
    assert caught.value.file == str(broken) and caught.value.line == 3, str(caught.value)


def test_tables_on_a_trl_recipe_are_refused_by_name(tmp_path):
    # a TRL recipe is YAML of flat keys: read as TOML it was a TOMLDecodeError traceback
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nnum_generations: 4\n")
    with pytest.raises(grpofit.ArgumentError, match="recipe.yaml.*TRL recipe"):
        grpofit.estimate(config=recipe, grpo={"num_generations": 8}, gpu_mem="24GiB", **QUIET)
    # alone, the recipe is estimated as the binary reads it
    assert grpofit.estimate(config=recipe, gpu_mem="24GiB", **QUIET).fits
