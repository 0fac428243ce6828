"""``version-mapping`` and ``feature-dependencies``, subcommands of both ``kraftkit features`` and
``kraftkit storage`` as of Kafka 4.x's ``kafka-features.sh`` and ``kafka-storage.sh``, printing
what they print (checked against Kafka 4.4.0's tools):

    $ kraftkit features version-mapping --release-version 3.9
    metadata.version=21 (3.9)
    kraft.version=1
    transaction.version=0
    ...
    $ kraftkit features feature-dependencies --feature eligible.leader.replicas.version=1
    eligible.leader.replicas.version=1 requires:
        metadata.version=23 (4.0-IV1)

Bad input (an unknown release or feature, a level a feature does not have) is exit 2.
"""

from __future__ import annotations

import argparse

from kraftkit.cli.exits import EXIT_OK, fail

#: The order Kafka's tools list the features in (``Feature.PRODUCTION_FEATURES`` of Kafka 4.4);
#: features kraftkit knows beyond these follow by name.
KAFKA_FEATURE_ORDER = (
    "kraft.version",
    "transaction.version",
    "group.version",
    "eligible.leader.replicas.version",
    "share.version",
    "streams.version",
)
MV = "metadata.version"
#: the lowest metadata.version Kafka's version-mapping takes (KRaft's first production level)
MINIMUM_BOOTSTRAP_LEVEL = 7


def add_parsers(sub: argparse._SubParsersAction, tool: str) -> None:
    """Adds both subcommands to ``kraftkit <tool>`` (``features`` or ``storage``)."""
    v = sub.add_parser(
        "version-mapping",
        help="the feature levels a release version means (as kafka-" + tool + " version-mapping)",
        description="Print metadata.version and the level of every production feature that --release-version "
        "(a release like 3.9, a metadata.version like 3.9-IV0, or a level) means: what formatting or "
        "upgrading to it sets. Exit 2 on an unknown release.",
    )
    v.add_argument(
        "--release-version",
        metavar="V",
        default=None,
        help="the release to map (default: the latest production metadata.version kraftkit knows); "
        "the lowest is 3.3-IV3",
    )
    v.set_defaults(func=run_version_mapping, tool=tool)
    d = sub.add_parser(
        "feature-dependencies",
        help="what a feature level requires of other features (as kafka-" + tool + " feature-dependencies)",
        description="Print, for each --feature NAME=LEVEL, the levels of other features it requires "
        "(e.g. eligible.leader.replicas.version=1 requires metadata.version=23), or that it has none. "
        "Exit 2 on an unknown feature or level.",
    )
    d.add_argument(
        "--feature",
        action="append",
        required=True,
        metavar="NAME=LEVEL",
        help="a feature and level, e.g. transaction.version=2 or metadata.version=21 (repeatable)",
    )
    d.set_defaults(func=run_feature_dependencies, tool=tool)


def _ordered(names) -> list[str]:
    known = [n for n in KAFKA_FEATURE_ORDER if n in names]
    return known + sorted(n for n in names if n not in KAFKA_FEATURE_ORDER)


def run_version_mapping(args: argparse.Namespace) -> int:
    from kraftkit.errors import KraftkitError
    from kraftkit.features import registry

    command = f"{args.tool} version-mapping"
    reg = registry()
    try:
        mv = reg.latest_production if args.release_version is None else reg.metadata_version(args.release_version)
    except KraftkitError as e:
        return fail(command, f"--release-version: {e}")
    if mv.level < MINIMUM_BOOTSTRAP_LEVEL:
        lowest = reg.by_level(MINIMUM_BOOTSTRAP_LEVEL).name
        return fail(command, f"--release-version {args.release_version}: {mv.name} is below {lowest}, the lowest")
    shown = mv.name if args.release_version is None else args.release_version.strip()
    lines = [f"{MV}={mv.level} ({shown})"]
    production = [name for name, f in reg.features.items() if f.production]
    lines += [f"{name}={reg.features[name].default_level(mv.level)}" for name in _ordered(production)]
    print("\n".join(lines))
    return EXIT_OK


def run_feature_dependencies(args: argparse.Namespace) -> int:
    from kraftkit.errors import KraftkitError
    from kraftkit.features import registry

    command = f"{args.tool} feature-dependencies"
    reg = registry()
    lines = []
    for spec in args.feature:
        name, sep, text = spec.partition("=")
        name, text = name.strip(), text.strip()
        if not sep:
            return fail(command, f"--feature {spec[:80]!r}: expected NAME=LEVEL (no '=')")
        if not (text.isascii() and text.isdigit() and len(text) <= 5):
            return fail(command, f"--feature {spec[:80]!r}: the level must be a whole number from 0 to 32767")
        level = int(text)
        try:
            if name == MV:
                label = f"{MV}={level} ({reg.by_level(level).name})"
                deps: dict[str, int] = {}
            else:
                deps = reg.feature(name).level(level).dependencies
                label = f"{name}={level}"
        except KraftkitError as e:
            return fail(command, f"--feature {spec[:80]!r}: {e}")
        if not deps:
            lines.append(f"{label} has no dependencies.")
            continue
        lines.append(f"{label} requires:")
        for dep in ([MV] if MV in deps else []) + _ordered([d for d in deps if d != MV]):
            lv = deps[dep]
            lines.append(f"    {dep}={lv}" + (f" ({reg.by_level(lv).name})" if dep == MV else ""))
    print("\n".join(lines))
    return EXIT_OK


__all__ = ["add_parsers", "run_feature_dependencies", "run_version_mapping"]
