"""The ``spark-submit`` entry point: ``kraftkit spark ...`` with the session spark-submit made.

    spark-submit --master yarn --deploy-mode client \\
        --archives kraftkit-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python \\
        "$(python -c 'import kraftkit.spark.submit as s; print(s.__file__)')" \\
        audit hdfs:///kafka/fleet --out hdfs:///kafka/fleet-audit

Arguments are those of ``kraftkit spark`` (``audit|verify|rewrite|scan PATH ...``).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from kraftkit.cli import spark as cli
    from kraftkit.cli.main import main as kraftkit_main

    cli.AMBIENT_SESSION = True
    return kraftkit_main(["spark", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
