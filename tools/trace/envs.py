#!/usr/bin/env python3
"""Builds the tracer's environments (tools/trace/README.md).

- one shared interpreter with torch: a venv at $TRACE_ENV (default /work/trace-env);
- per TRL release, a folder $TRACE_ENV/releases/trl-X holding that TRL with the transformers,
  peft and accelerate of `releases.json` and whatever else they need that the shared venv lacks
  (`pip install --target DIR --no-deps` of the versions pip's own resolver picks against the
  shared venv, so torch is never installed twice). Runs use it through PYTHONPATH.

Existing folders are kept (a cache); `--force` rebuilds. Usage:
  python3 tools/trace/envs.py [--force] [RELEASE ...]
"""
import argparse, json, os, shutil, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = Path(os.environ.get("TRACE_ENV", "/work/trace-env"))


def shared_env(torch_version):
    py = ENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(ENV)], check=True)
    probe = subprocess.run([str(py), "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or not probe.stdout.startswith(torch_version):
        # PyPI's torch wheel pulls its CUDA libraries even for CPU use: several GB, once
        subprocess.run([str(py), "-m", "pip", "install", "-q", f"torch=={torch_version}",
                        "numpy", "pandas", "pyarrow",
                        # trl 1.0.0 imports requests without requiring it
                        "requests"], check=True)
    return py


def release_dir(trl):
    return ENV / "releases" / f"trl-{trl}"


def build(py, trl, pins, force):
    dest = release_dir(trl)
    if dest.exists() and (dest / ".complete").exists() and not force:
        print(f"trl {trl}: cached at {dest}")
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    wanted = [f"trl=={trl}"] + [f"{k}=={v}" for k, v in pins.items()]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        # what pip would add to the shared venv for these pins (torch already there)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--dry-run", "--report", str(report)]
                       + wanted, check=True)
        plan = json.loads(report.read_text())["install"]
    exact = [f"{p['metadata']['name']}=={p['metadata']['version']}" for p in plan]
    if any(e.lower().startswith(("torch==", "nvidia-")) for e in exact):
        sys.exit(f"trl {trl}: its pins ask for another torch: {exact}")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--target", str(dest)]
                   + exact, check=True)
    (dest / "versions.json").write_text(json.dumps(sorted(exact), indent=1))
    (dest / ".complete").write_text("")
    print(f"trl {trl}: built {dest} ({len(exact)} packages)")
    return dest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("releases", nargs="*")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    table = json.loads((HERE / "releases.json").read_text())
    py = shared_env(table["torch"])
    for trl in a.releases or table["releases"]:
        build(py, trl, table["releases"][trl], a.force)


if __name__ == "__main__":
    main()
