"""The ``spark-submit`` entry point: ``kraftkit spark ...`` with the session spark-submit made.

    spark-submit --master yarn --deploy-mode client \\
        --archives kraftkit-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python \\
        "$(python -c 'import kraftkit.cli.spark_submit as s; print(s.__file__)')" \\
        audit hdfs:///kafka/fleet --out hdfs:///kafka/fleet-audit

Arguments are those of ``kraftkit spark`` (``audit|verify|rewrite|scan PATH ...``). The parsed
arguments carry ``ambient_session=True``, so :func:`kraftkit.cli.spark.session` hands the jobs
the session spark-submit configured instead of starting a local one.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from kraftkit.cli.main import main as kraftkit_main

    argv = sys.argv[1:] if argv is None else argv
    return kraftkit_main(["spark", *argv], namespace=argparse.Namespace(ambient_session=True))


if __name__ == "__main__":
    sys.exit(main())
