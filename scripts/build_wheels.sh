#!/usr/bin/env bash
# Release wheels and the sdist, for a package registry: manylinux2014 (manylinux_2_17, glibc 2.17:
# RHEL/CentOS 7 and newer, Amazon Linux 2, Debian 9+, Ubuntu 18.04+), linked by zig against that
# glibc's symbols whatever this machine's glibc is, then checked by `auditwheel show`.
#
#   scripts/build_wheels.sh [OUT_DIR]      (default dist/; also `./dev wheels [OUT_DIR]`)
#
# Environment:
#   KRAFTKIT_WHEEL_TARGETS   Rust targets (default "x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu";
#                            a missing one is added with `rustup target add`)
#   KRAFTKIT_WHEEL_PYTHONS   interpreters (default: python3.11 python3.12 python3.13, from PATH or pyenv)
#   CARGO_TARGET_DIR         cargo's build directory (default target/wheels, apart from `maturin develop`'s)
#
# The extension is built for each CPython version (not abi3, see Cargo.toml), so there is one wheel
# per interpreter and target: cp311, cp312, cp313. A cross-compiled (aarch64) wheel takes the
# interpreter's version from the interpreter given; maturin supplies the target's sysconfig.
# Needs: cargo and rustup, the venv's maturin, ziglang and auditwheel (installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-dist}"
py=.venv/bin/python
[ -x "$py" ] || { echo "build_wheels: no .venv (run ./dev test or ./dev demo once)" >&2; exit 2; }
command -v cargo >/dev/null || { echo "build_wheels: cargo (Rust) is required" >&2; exit 2; }
"$py" -m pip install -q --disable-pip-version-check "maturin>=1.9,<2" ziglang auditwheel
# maturin finds zig as `python -m ziglang` of the first python on PATH
export PATH="$PWD/.venv/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target/wheels}"

targets="${KRAFTKIT_WHEEL_TARGETS:-x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu}"
pythons=()
for v in ${KRAFTKIT_WHEEL_PYTHONS:-python3.11 python3.12 python3.13}; do
  p=""
  if "$v" -c "" 2>/dev/null; then  # on PATH and runs (a pyenv shim of a version not selected does not)
    p="$(command -v "$v")"
  elif command -v pyenv >/dev/null; then
    p="$(ls -d "$(pyenv root)"/versions/"${v#python}".*/bin/"$v" 2>/dev/null | sort -V | tail -1)"
  fi
  if [ -n "$p" ]; then
    pythons+=("$p")
  else
    echo "build_wheels: no $v found: its wheels are not built" >&2
  fi
done
[ "${#pythons[@]}" -gt 0 ] || { echo "build_wheels: no interpreter found" >&2; exit 2; }

# the JVM reader's jar (python/kraftkit/spark/jvm/kraftkit-spark.jar, shipped inside the package):
# its JNI library is built for this machine only; on other platforms kraftkit.spark.jvm.jar() says
# None and format("kraft") stays the Python data source
scripts/build_spark_jvm.sh

mkdir -p "$out"
for t in $targets; do
  if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$t"; then
    rustup target add "$t"
  fi
  .venv/bin/maturin build --release --strip --zig --compatibility manylinux2014 --target "$t" \
    -i "${pythons[@]}" --out "$out"
done
.venv/bin/maturin sdist --out "$out"

# every wheel: the platform tag auditwheel derives from the symbols the extension uses must be
# manylinux_2_17 (or older) and no library outside the manylinux set may be needed
status=0
for w in "$out"/kraftkit-*.whl; do
  report="$(.venv/bin/auditwheel show "$w")"
  printf '%s\n' "$report"
  tag="$(tr -s ' \n' ' ' <<<"$report" | sed -n 's/.*consistent with the following platform tag: "\([^"]*\)".*/\1/p')"
  case "$tag" in
    manylinux_2_5_* | manylinux_2_12_* | manylinux_2_17_*) ;;
    *)
      echo "build_wheels: $w: auditwheel gives platform tag '$tag', not manylinux_2_17 or older" >&2
      status=1
      ;;
  esac
done
ls -l "$out"
exit "$status"
