"""The package as a notebook user meets it (pyqa): each answer against `grpofit ... --json` run
by hand on the same run."""

import json
import subprocess

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
