"""Strategic merge as the apiserver does it for a JobSet spec: keyed lists, replaced lists, nulls."""

from __future__ import annotations

from trainop.trainjob.strategicmerge import merge


def test_maps_merge_and_scalars_replace() -> None:
    assert merge({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"y": 3}, "b": 2}) == {"a": {"x": 1, "y": 3}, "b": 2}


def test_a_null_deletes_the_key() -> None:
    assert merge({"a": 1, "b": 2}, {"a": None}) == {"b": 2}


def test_a_list_without_a_merge_key_is_replaced() -> None:
    assert merge({"tolerations": [{"key": "a"}]}, {"tolerations": [{"key": "b"}]}) == {
        "tolerations": [{"key": "b"}]
    }


def test_keyed_items_merge_in_place() -> None:
    original = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    assert merge(original, {"env": [{"name": "B", "value": "3"}]}) == {
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    }


def test_a_new_keyed_item_goes_before_the_items_only_the_original_has() -> None:
    original = {"env": [{"name": "A"}, {"name": "B"}]}
    assert [e["name"] for e in merge(original, {"env": [{"name": "C"}]})["env"]] == ["C", "A", "B"]


def test_original_items_before_a_patched_one_keep_their_place() -> None:
    original = {"env": [{"name": "A"}, {"name": "B"}]}
    merged = merge(original, {"env": [{"name": "B", "value": "x"}, {"name": "C"}]})
    assert [e["name"] for e in merged["env"]] == ["A", "B", "C"]


def test_volume_mounts_are_keyed_by_mount_path() -> None:
    original = {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    merged = merge(original, {"volumeMounts": [{"name": "cache", "mountPath": "/data", "readOnly": True}]})
    assert merged == {"volumeMounts": [{"name": "cache", "mountPath": "/data", "readOnly": True}]}


def test_merging_changes_neither_argument() -> None:
    original = {"env": [{"name": "A", "value": "1"}]}
    patch = {"env": [{"name": "A", "value": "2"}]}
    merge(original, patch)
    assert original == {"env": [{"name": "A", "value": "1"}]}
    assert patch == {"env": [{"name": "A", "value": "2"}]}
