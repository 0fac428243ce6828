"""The plumbing the fleet jobs (:mod:`kraftkit.spark.jobs`) share: the metadata partition
directories of a fleet's files, a local copy of a remote directory, progress on stderr, results
written as Parquet, and the RDD that runs one task per item."""

from __future__ import annotations

import os
import tempfile
import threading
from collections import defaultdict
from typing import Any, Self

from kraftkit.spark import layout


def partition_dirs(files: list[layout.FleetFile]) -> dict[str, dict[str, str]]:
    """cluster -> node -> metadata partition directory. Two directories named the same node of
    the same cluster are a :class:`~kraftkit.spark.layout.FleetError` (a job would read one)."""
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for f in files:
        have = out[f.cluster].setdefault(f.node, f.partition_dir)
        if have != f.partition_dir:
            raise layout.FleetError(
                f"{have} and {f.partition_dir} are both node {f.node} of cluster {f.cluster} "
                f"(named by {f.named_by}); give the job one of them"
            )
    return {c: dict(sorted(n.items())) for c, n in sorted(out.items())}


class LocalCopy:
    """A local copy of a directory named by a URI (HDFS, S3...), or the local path itself."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tmp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> str:
        local = layout.local_path(self.path)
        if local is not None:
            return local
        from pyarrow import fs as pafs

        self.tmp = tempfile.TemporaryDirectory(prefix="kraftkit-spark-")
        dst = os.path.join(self.tmp.name, os.path.basename(self.path.rstrip("/")))
        os.makedirs(dst)
        src_fs, src = pafs.FileSystem.from_uri(self.path)
        pafs.copy_files(src, dst, source_filesystem=src_fs, destination_filesystem=pafs.LocalFileSystem())
        return dst

    def __exit__(self, *exc: object) -> None:
        if self.tmp is not None:
            self.tmp.cleanup()


class Progress:
    """The progress of the running Spark stages (completed/all tasks of the active stages), polled once
    a second from a background thread and shown by the CLI's one progress line
    (:class:`kraftkit.cli.progress.Progress`: on stderr when it is a terminal; ``enabled`` True forces
    it, False turns it off)."""

    def __init__(self, spark: Any, label: str, enabled: bool | None = None) -> None:
        from kraftkit.cli.progress import Progress as Line

        self.sc = spark.sparkContext
        self.line = Line(label, quiet=enabled is False)
        if enabled:
            self.line.enabled = True
        self.label = label
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        if self.line.enabled:
            self.line.__enter__()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        tracker = self.sc.statusTracker()
        while not self._stop.wait(1.0):
            done = total = 0
            stages = []
            for sid in tracker.getActiveStageIds():
                st = tracker.getStageInfo(sid)
                if st is not None:
                    done, total = done + st.numCompletedTasks, total + st.numTasks
                    stages.append(str(sid))
            self.line.total = total or None
            what = f"{self.label}: stage {', '.join(stages)} tasks" if stages else f"{self.label}: working"
            self.line.update(done, what)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.line.close()


def write_result(df: Any, out: str | None, name: str) -> str | None:
    if out is None:
        return None
    dest = out.rstrip("/") + "/" + name
    df.write.mode("overwrite").parquet(dest)
    return dest


def task_rdd(spark: Any, items: list, fn) -> Any:
    sc = spark.sparkContext
    return sc.parallelize(items, max(1, min(len(items), sc.defaultParallelism * 4))).flatMap(fn)
