"""KIP-584/KIP-778 validation of feature updates: messages follow Kafka's
FeatureControlManager (Kafka's metadata module), explanations name the nodes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftkit.features import UnknownVersionError, registry
from kraftkit.features.validation import (
    FeatureUpdate,
    NodeFeatures,
    UpgradeType,
    effective_metadata_version,
    incompatibilities,
    validate_updates,
)

REG = registry()
MV = "metadata.version"
L39, L37IV2, L37IV1, L43 = 21, 17, 16, 30


def node(i, role="broker", mv=(1, L43), **feats):
    return NodeFeatures(i, role, {MV: mv, **{k.replace("_", "."): v for k, v in feats.items()}})


def one(finalized, update, nodes):
    (r,) = validate_updates(finalized, [update], nodes)
    return r


def test_upgrade_needs_every_node_to_support_the_level():
    nodes = [node(1), node(2, mv=(1, L39)), node(3, "controller")]
    r = one({MV: L39}, FeatureUpdate(MV, L43), nodes)
    assert not r.ok and "broker 2 (supports 1 (3.0-IV1)..21 (3.9-IV0))" in r.error
    assert "Upgrade the software of broker 2" in r.fix
    assert one({MV: 20}, FeatureUpdate(MV, L39), nodes).ok


def test_a_node_lacking_a_feature_supports_only_level_0_extra_features_are_fine():
    nodes = [node(1, group_version=(0, 1)), node(2)]
    r = one({MV: L43}, FeatureUpdate("group.version", 1), nodes)
    assert not r.ok and "broker 2 (does not support it)" in r.error
    assert one({MV: L43}, FeatureUpdate("group.version", 0, UpgradeType.SAFE_DOWNGRADE), nodes).ok
    # node 1 knows group.version and nobody finalized it: nothing stops node 1 from joining
    assert incompatibilities(nodes[0], {MV: L43}) == []


def test_direction_must_match_the_upgrade_type():
    nodes = [node(1)]
    r = one({MV: L39}, FeatureUpdate(MV, 20), nodes)
    assert "without setting the upgrade type to either safe or unsafe downgrade" in r.error
    r = one({MV: 20}, FeatureUpdate(MV, L39, UpgradeType.SAFE_DOWNGRADE), nodes)
    assert r.error == "Can't downgrade to a newer version."
    assert one({MV: 20}, FeatureUpdate(MV, -1), nodes).error == "A feature version cannot be less than 0."


def test_safe_downgrade_only_without_metadata_change_between():
    nodes = [node(1)]
    # 3.9-IV0 -> 3.7-IV2: the levels in between changed nothing (Kafka's upgrade notes)
    assert one({MV: L39}, FeatureUpdate(MV, L37IV2, UpgradeType.SAFE_DOWNGRADE), nodes).ok
    r = one({MV: L37IV2}, FeatureUpdate(MV, L37IV1, UpgradeType.SAFE_DOWNGRADE), nodes)
    assert "Refusing to perform the requested downgrade because it might delete metadata information" in r.error
    assert "3.7-IV2" in r.error
    # unsafe: Kafka refuses, kraftkit accepts and says why it is unsafe
    r = one({MV: L37IV2}, FeatureUpdate(MV, L37IV1, UpgradeType.UNSAFE_DOWNGRADE), nodes)
    assert r.ok and "3.7-IV2" in r.notes[0]


def test_metadata_version_floor_and_unknown_levels():
    nodes = [node(1, mv=(1, 99))]
    assert "less than 3.3-IV0" in one({MV: L39}, FeatureUpdate(MV, 3, UpgradeType.UNSAFE_DOWNGRADE), nodes).error
    assert "Unknown metadata.version" in one({MV: L39}, FeatureUpdate(MV, 99), nodes).error
    # disabling it is refused for what it is, not for the nodes' ranges (no release supports level 0)
    r = one({MV: L39}, FeatureUpdate(MV, 0, UpgradeType.SAFE_DOWNGRADE), [node(1)])
    assert r.error.endswith("Unable to set a metadata.version less than 3.3-IV0")
    assert "cannot be disabled" in r.fix and "Upgrade the software" not in r.fix
    # the lossy downgrade's fix names the flag that asks for it
    r = one({MV: L37IV2}, FeatureUpdate(MV, L37IV1, UpgradeType.SAFE_DOWNGRADE), nodes)
    assert "--unsafe" in r.fix


def test_dependencies_hold_after_the_whole_request():
    elr = REG.feature("eligible.leader.replicas.version")
    need = elr.level(1).dependencies[MV]
    nodes = [node(1, eligible_leader_replicas_version=(0, 1))]
    r = one({MV: need - 1}, FeatureUpdate(elr.name, 1), nodes)
    assert not r.ok and f"depends on metadata.version level {need}" in r.error
    # raising metadata.version in the same request satisfies it; lowering it breaks ELR
    rs = validate_updates({MV: need - 1}, [FeatureUpdate(MV, need), FeatureUpdate(elr.name, 1)], nodes)
    assert all(x.ok for x in rs)
    rs = validate_updates({MV: L43, elr.name: 1}, [FeatureUpdate(MV, L39, UpgradeType.UNSAFE_DOWNGRADE)], nodes)
    assert "eligible.leader.replicas.version=1 depends on metadata.version" in rs[0].error
    assert "Lower eligible.leader.replicas.version" in rs[0].fix


def test_one_failure_fails_the_whole_request():
    nodes = [node(1, group_version=(0, 1))]
    rs = validate_updates({MV: L39}, [FeatureUpdate(MV, L43), FeatureUpdate("transaction.version", 2)], nodes)
    assert not rs[1].ok and "broker 1 (does not support it)" in rs[1].error
    assert not rs[0].ok and rs[0].error.startswith("The update failed for all features since transaction.version")


def test_broker_protection():
    old = node(7, mv=(1, L39))
    assert incompatibilities(old, {MV: L43}) == [
        "broker 7 cannot join: metadata.version is finalized at 30 (4.3-IV0) but it supports 1 (3.0-IV1)..21 (3.9-IV0)"]
    assert "does not know it" in incompatibilities(old, {MV: L39, "share.version": 1})[0]


def test_effective_metadata_version():
    assert effective_metadata_version(software_max=None, ibp=21, finalized=21) == 0
    assert effective_metadata_version(software_max=30, ibp=0, finalized=21) == 0
    assert effective_metadata_version(software_max=30, ibp=21, finalized=None) == 0
    assert effective_metadata_version(software_max=30, ibp=21, finalized=21) == 21
    with pytest.raises(UnknownVersionError):
        effective_metadata_version(software_max=21, ibp=21, finalized=30)


@given(cur=st.integers(4, L43), new=st.integers(4, L43))
def test_safe_downgrade_iff_no_changed_level_in_between(cur, new):
    if new >= cur:
        return
    r = one({MV: cur}, FeatureUpdate(MV, new, UpgradeType.SAFE_DOWNGRADE), [node(1)])
    changed = any(REG.by_level(x).did_metadata_change for x in range(new + 1, cur + 1))
    assert r.ok != changed
