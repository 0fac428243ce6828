"""The hostile corpus, made once per session (the bombs once per process)."""

from __future__ import annotations

import pytest

from tests.hostile import corpus as C


@pytest.fixture(scope="session")
def hostile_base(tmp_path_factory) -> C.Base:
    return C.write_base(tmp_path_factory.mktemp("hostile-base") / "logdir")


@pytest.fixture(scope="session")
def hostile_corpus(hostile_base, tmp_path_factory) -> C.Corpus:
    return C.Corpus(hostile_base, tmp_path_factory.mktemp("hostile-cases"))
