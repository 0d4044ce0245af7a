"""The deployment's keys are spelled once (``manifest/fields.py``): the manifest's key lists, the flags
``launch.args`` may not repeat and the keys read back from an artifact's command line all come from it, and
each names a field of ``Deployment`` (a key spelled differently in one place would be silently dropped)."""

from __future__ import annotations

import dataclasses

from pytest_gpulayout.deployment import Deployment, Launch, Require
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.manifest import keys
from pytest_gpulayout.manifest.fields import DEPLOYMENT_FIELDS, FLAG_KEYS, LAUNCH_FIELDS, REQUIRE_FIELDS, SECTIONS


def _names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_every_key_is_a_field_of_what_it_builds() -> None:
    llamacpp = set(keys.DEPLOYMENT_KEYS) - _names(Deployment)
    assert {f.key for f in DEPLOYMENT_FIELDS} - llamacpp <= _names(Deployment)
    assert llamacpp <= {f.key for f in DEPLOYMENT_FIELDS}  # llama.cpp's own keys, built into Deployment.llamacpp
    assert set(SECTIONS) <= _names(Deployment)
    assert {f.key for f in REQUIRE_FIELDS} == _names(Require)
    assert {f.key for f in LAUNCH_FIELDS} == _names(Launch)


def test_the_key_lists_are_the_table() -> None:
    assert keys.REQUIRE_KEYS == tuple(f.key for f in REQUIRE_FIELDS)
    assert keys.LAUNCH_KEYS == tuple(f.key for f in LAUNCH_FIELDS)
    assert set(keys.DEPLOYMENT_KEYS) == {f.key for f in DEPLOYMENT_FIELDS} | set(SECTIONS)


def test_every_flag_key_has_each_engines_flag_and_owns_it_in_launch_args() -> None:
    for engine in ENGINES.values():
        for key in FLAG_KEYS:
            flag = getattr(engine.cli.flags, key)  # an engine without such a flag says "" (llama.cpp's own keys)
            assert isinstance(flag, str)
            if flag:
                assert keys.ARG_OWNERS[flag] == key, (engine.name, key, flag)
