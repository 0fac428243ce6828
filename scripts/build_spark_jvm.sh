#!/usr/bin/env bash
# The JVM Spark reader (`spark.read.format("kraft")` read by the Rust core through JNI, see
# docs/spark.md): compiles python/kraftkit/spark/jvm/src with javac against pyspark's jars,
# builds the JNI library (rust/jni, a cdylib over the core crate) with cargo, and packs both into
# python/kraftkit/spark/jvm/kraftkit-spark.jar (git-ignored; the library is a resource of the jar,
# loaded from it by each JVM). Without javac, jar or pyspark it builds nothing and says so (the
# Python data source is used then); exit status 0 either way, 1 when a build step fails.
#
#   scripts/build_spark_jvm.sh            (run by ./dev's set-up)
set -euo pipefail
cd "$(dirname "$0")/.."

py=.venv/bin/python
src=python/kraftkit/spark/jvm/src
out=python/kraftkit/spark/jvm/kraftkit-spark.jar
for tool in javac jar cargo; do
  if ! command -v "$tool" >/dev/null; then
    echo "build_spark_jvm: no $tool: the JVM reader is not built (format(\"kraft\") uses the Python data source)" >&2
    exit 0
  fi
done
jars="$("$py" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))' 2>/dev/null || true)"
if [ -z "$jars" ] || [ ! -d "$jars" ]; then
  echo "build_spark_jvm: pyspark (with its jars) is not installed in .venv: the JVM reader is not built" >&2
  exit 0
fi

# rust/jni is a crate of its own (not a member of the root's workspace, so the Python package's
# build and sdist stay as they were); it shares the root's target directory
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release -q --manifest-path rust/jni/Cargo.toml --target-dir "$target_dir"
lib="$target_dir/release/libkraftkit_jni.so"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/classes"
javac --release 17 -nowarn -Xlint:none -cp "$jars/*" -d "$work/classes" $(find "$src" -name '*.java' | sort)
case "$(uname -m)" in
  x86_64 | amd64) arch=x86_64 ;;
  aarch64 | arm64) arch=aarch64 ;;
  *) arch="$(uname -m)" ;;
esac
native="$work/classes/io/kraftkit/spark/native/linux-$arch"
mkdir -p "$native" "$work/classes/META-INF/services"
cp "$lib" "$native/libkraftkit_jni.so"
echo io.kraftkit.spark.KraftSource > "$work/classes/META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
jar cf "$work/kraftkit-spark.jar" -C "$work/classes" .
mv -f "$work/kraftkit-spark.jar" "$out"
echo "build_spark_jvm: $out" >&2
