"""The feature registry generated from real Kafka jars: facts checked against Kafka's own
documentation and KIP-778 rules (independent of the generator)."""

from __future__ import annotations

import pytest

from kraftkit.features import UnknownVersionError, registry
from kraftkit.features.rewrite import record_versions


@pytest.fixture(scope="module")
def reg():
    return registry()


def test_levels_are_contiguous_from_3_0_iv1(reg):
    levels = [m.level for m in reg.metadata_versions]
    assert levels == list(range(1, levels[-1] + 1))
    assert reg.by_level(1).name == "3.0-IV1"  # MINIMUM_KRAFT_VERSION (KIP-778)
    assert reg.by_level(4).name == "3.3-IV0"  # the first level with FeatureLevelRecord


@pytest.mark.parametrize("spec,name", [
    ("3.9", "3.9-IV0"), ("3.7", "3.7-IV4"), ("3.5", "3.5-IV2"), ("3.5.2", "3.5-IV2"),
    ("3.5-IV1", "3.5-IV1"), (21, "3.9-IV0"), ("17", "3.7-IV2"), ("4.0", "4.0-IV3"),
])
def test_release_and_name_parsing(reg, spec, name):
    # a bare release means its highest production level (MetadataVersion.fromVersionString;
    # upgrade docs: "--release-version 3.7" finalizes 3.7-IV4)
    assert reg.metadata_version(spec).name == name


@pytest.mark.parametrize("bad", ["2.8", "3.9-IV9", "banana", 0, 999])
def test_unknown_versions_are_clear_errors(reg, bad):
    # a level above the newest is named as newer than kraftkit knows, with the newest
    msg = "is newer than kraftkit knows" if bad == 999 else "unknown metadata.version"
    with pytest.raises(UnknownVersionError, match=msg):
        reg.metadata_version(bad)


def test_metadata_changed_rule(reg):
    # Kafka's upgrade notes: 3.9-IV0 -> 3.7-IV2 has no metadata change in between;
    # 3.7-IV2 itself changed the format (JBOD), so 3.7-IV2 -> 3.7-IV1 is not safe
    assert not reg.metadata_changed(21, 17)
    assert reg.metadata_changed(17, 16)
    assert reg.metadata_changed(16, 17) == reg.metadata_changed(17, 16)
    assert [m.name for m in reg.changes_between(11, 15)] == ["3.6-IV1", "3.6-IV2", "3.7-IV0"]


def test_record_versions_follow_the_kips(reg):
    # KIP-858 (JBOD, 3.7-IV2): directories in PartitionRecord v1 and RegisterBrokerRecord v3
    assert record_versions(reg.metadata_version("3.7-IV1"))[3] == 0
    assert record_versions(reg.metadata_version("3.7-IV2"))[3] == 1
    assert record_versions(reg.metadata_version("3.7-IV2"))[0] == 3
    # KIP-966 (ELR, 4.0-IV1): PartitionRecord v2
    assert record_versions(reg.metadata_version("4.0-IV1"))[3] == 2
    # SCRAM in KRaft needs 3.5-IV2 (KIP-554), delegation tokens 3.6-IV2 (KIP-900),
    # controller registration 3.7-IV0 (KIP-919), metadata transactions 3.6-IV1 (KIP-868)
    for key, first in ((11, "3.5-IV2"), (10, "3.6-IV2"), (27, "3.7-IV0"), (23, "3.6-IV1")):
        below = reg.by_level(reg.metadata_version(first).level - 1)
        assert record_versions(below)[key] is None, (key, below)
        assert record_versions(reg.metadata_version(first))[key] == 0, key
    # no FeatureLevelRecord before 3.3-IV0 (KIP-778)
    assert record_versions(reg.by_level(3))[12] is None
    assert record_versions(reg.by_level(4))[12] == 0


def test_features_and_releases(reg):
    kv = reg.feature("kraft.version")
    assert kv.level(1).bootstrap_metadata_version == reg.metadata_version("3.9-IV0").level  # KIP-853 in 3.9
    assert kv.default_level(reg.metadata_version("3.8").level) == 0
    assert reg.release("3.9").supported_range("metadata.version") == (1, 21)
    assert reg.release("3.5").supported_range("kraft.version") is None
    elr = reg.feature("eligible.leader.replicas.version")
    assert elr.level(1).dependencies == {"metadata.version": reg.metadata_version("4.0-IV1").level}
    with pytest.raises(UnknownVersionError):
        reg.feature("no.such.feature")
    assert set(reg.supported_ranges()) >= {"metadata.version", "kraft.version", "transaction.version", "group.version"}
