"""What changed between two metadata images, section by section.

``image_delta(old, new)`` compares the images' :meth:`~kraftkit.metadata.image.MetadataImage.sections`
and returns, for each section that differs, the keys ``added`` (key -> new value), ``removed``
(key -> old value) and ``changed`` (key -> {"old": ..., "new": ...}). Topics are compared by
name, and a changed topic lists its partition changes the same way. An empty dict means the
images are equal.
"""

from __future__ import annotations

from typing import Any

from kraftkit.metadata.image import MetadataImage


def _diff_maps(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    added = {k: new[k] for k in new if k not in old}
    removed = {k: old[k] for k in old if k not in new}
    changed = {k: {"old": old[k], "new": new[k]} for k in old if k in new and old[k] != new[k]}
    if added:
        out["added"] = added
    if removed:
        out["removed"] = removed
    if changed:
        out["changed"] = changed
    return out


def image_delta(old: MetadataImage, new: MetadataImage) -> dict[str, Any]:
    a, b = old.sections(), new.sections()
    out: dict[str, Any] = {}
    for section in b:
        if a[section] == b[section]:
            continue
        if section == "topics":
            d = _diff_maps({k: v["id"] for k, v in a[section].items()}, {k: v["id"] for k, v in b[section].items()})
            d = {
                kind: {k: (a if kind == "removed" else b)[section][k] for k in v}
                for kind, v in d.items()
                if kind != "changed"
            }
            # a topic deleted and created again under the same name has a new id: removed + added
            recreated = [k for k in a[section] if k in b[section] and a[section][k]["id"] != b[section][k]["id"]]
            for k in recreated:
                d.setdefault("removed", {})[k] = a[section][k]
                d.setdefault("added", {})[k] = b[section][k]
            changed = {}
            for k in a[section]:
                if k in b[section] and k not in recreated and a[section][k] != b[section][k]:
                    changed[k] = _diff_maps(a[section][k]["partitions"], b[section][k]["partitions"])
            if changed:
                d["changed"] = changed
            out[section] = d
        elif section in ("features", "producerIds"):
            out[section] = _diff_maps(a[section], b[section])
        else:
            out[section] = _diff_maps(a[section], b[section])
    return out
