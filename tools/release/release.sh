#!/usr/bin/env bash
# A release of grpofit from one version number (Cargo.toml's [workspace.package] version): the
# crate packages and the wheels, each checked, then what to upload. Uploads nothing itself.
#
#   tools/release/version.py --set 0.2.0   # first, when the version changes (then commit)
#   tools/release/release.sh               # build and check into target/release-dist/
#   tools/release/release.sh --allow-dirty # the same from uncommitted work (a trial, not a release)
#
# Steps:
#   1. the version agrees everywhere (tools/release/version.py --check; --release also wants
#      CHANGELOG.md's section, unless --allow-dirty);
#   2. cargo package --workspace: both .crate files, each verified by building it from its own
#      package (the binary against the packaged core);
#   3. the wheels, manylinux2014 via maturin and zig: x86_64, and aarch64 (Grace Hopper) when
#      the Rust target is installed or `rustup target add` can fetch it;
#   4. each wheel this machine can run (its architecture) installed into a fresh virtual
#      environment: `grpofit --version` and `import grpofit` must both say the version; a
#      wheel for another architecture is checked by its name, tag and contents;
#   5. what to upload, in order.
# Needs cargo, python3 (3.9+) and the package registry (maturin, ziglang), like tools/wheel/ci.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
python=${PYTHON:-python3}
allow_dirty=()
for arg in "$@"; do
    case "$arg" in
        --allow-dirty) allow_dirty=(--allow-dirty) ;;
        *) echo "release.sh: unknown argument $arg (only --allow-dirty)" >&2; exit 2 ;;
    esac
done

# 1. one version
release_check=(--release)
[ ${#allow_dirty[@]} -gt 0 ] && release_check=()
version=$("$python" tools/release/version.py --check "${release_check[@]}")
echo "== grpofit $version"
if [ ${#allow_dirty[@]} -eq 0 ] && [ -n "$(git status --porcelain)" ]; then
    echo "release.sh: the worktree has uncommitted changes: commit them (or --allow-dirty for a trial)" >&2
    exit 1
fi
dist=$root/target/release-dist
rm -rf "$dist"
mkdir -p "$dist"

# 2. the crates
echo "== cargo package --workspace (each crate built from its own package)"
cargo package --workspace --locked "${allow_dirty[@]}"
for crate in grpofit-core grpofit; do
    cp "target/package/$crate-$version.crate" "$dist/"
done

# 3. the wheels
work=$root/target/wheel-ci
if [ ! -x "$work/build/bin/maturin" ]; then
    "$python" -m venv "$work/build"
    "$work/build/bin/pip" install -q "maturin>=1.16,<2" ziglang
fi
host=$(uname -m)
targets=(x86_64-unknown-linux-gnu)
if rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu \
    || rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1; then
    targets+=(aarch64-unknown-linux-gnu)
else
    echo "release.sh: the aarch64-unknown-linux-gnu Rust target cannot be installed here: no aarch64 wheel" >&2
fi
for target in "${targets[@]}"; do
    echo "== wheel for $target"
    # the host's wheel is built as tools/wheel/ci.sh builds it (no --target), sharing its build
    target_flag=()
    [ "${target%%-*}" != "$host" ] && target_flag=(--target "$target")
    PATH="$work/build/bin:$PATH" maturin build --release --zig --compatibility manylinux2014 \
        "${target_flag[@]}" --out "$dist"
done

# 4. each wheel checked
for wheel in "$dist"/grpofit-*.whl; do
    name=$(basename "$wheel")
    case "$name" in
        "grpofit-$version-"*manylinux*) ;;
        *) echo "release.sh: $name: not grpofit-$version-...-manylinux*.whl" >&2; exit 1 ;;
    esac
    arch=$(echo "$name" | sed -E 's/.*manylinux[^.]*_(x86_64|aarch64)\.whl$/\1/')
    "$python" - "$wheel" "$version" <<'PY'
import sys, zipfile
wheel, version = sys.argv[1], sys.argv[2]
names = zipfile.ZipFile(wheel).namelist()
need = [f"grpofit-{version}.data/scripts/grpofit", "grpofit/__init__.py", "grpofit/_version.py"]
missing = [n for n in need if n not in names]
if missing:
    sys.exit(f"release.sh: {wheel}: lacks {missing}")
PY
    if [ "$arch" != "$host" ]; then
        echo "== $name: built for $arch, checked by name and contents (this machine is $host)"
        continue
    fi
    echo "== $name: installed into a fresh virtual environment"
    venv=$(mktemp -d)
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --no-deps "$wheel"
    said=$("$venv/bin/grpofit" --version)
    imported=$(cd / && "$venv/bin/python" -c 'import grpofit; print(grpofit.__version__)')
    rm -rf "$venv"
    if [ "$said" != "grpofit $version" ] || [ "$imported" != "$version" ]; then
        echo "release.sh: $name: grpofit --version says '$said', import grpofit says '$imported', not $version" >&2
        exit 1
    fi
    echo "   grpofit --version: $said; import grpofit: $imported"
done

# 5. what to upload
echo
echo "== grpofit $version is ready in ${dist#$root/}:"
(cd "$dist" && ls -l | tail -n +2)
cat <<EOF2

Upload, in this order (nothing was uploaded):
  git tag v$version && git push origin v$version
  cargo publish -p grpofit-core          # the core first: the binary's package depends on it
  cargo publish -p grpofit
  python3 -m twine upload target/release-dist/grpofit-$version-*.whl
EOF2
