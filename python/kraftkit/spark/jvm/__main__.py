"""``python -m kraftkit.spark.jvm``: prints the JVM reader's jar (for ``--jars``); exit status 1
with a reason when it was not built."""

from __future__ import annotations

import sys

from kraftkit.spark.jvm import JAR, jar


def main() -> int:
    j = jar()
    if j is None:
        print(
            f"kraftkit: no {JAR}: the JVM reader was not built (scripts/build_spark_jvm.sh needs javac)",
            file=sys.stderr,
        )
        return 1
    print(j)
    return 0


if __name__ == "__main__":
    sys.exit(main())
