"""SGLang's IB device check against the serving hosts' InfiniBand devices (``validate_ib_devices``).

``--disaggregation-ib-device`` (a PD server or encoder on the mooncake transfer backend) and ``--mooncake-ib-device``
(``--elastic-ep-backend mooncake``) are validated against ``/sys/class/infiniband`` of the host each server process
starts on (which flags, and when: ``rules_pd.ib_frames``). The release, after the line-only checks that
``sglang.pd.ib_devices`` judges:

* 0.5.9 - 0.5.12 (``server_args.py _validate_ib_devices``, 0.5.9 l.2610-2643): the names split on commas; the sysfs
  directory must exist (``RuntimeError``), hold a device (``RuntimeError``), and hold every name (``ValueError``).
* 0.5.13 - 0.5.18 (``server_args.py``, 0.5.18 l.7760-7826) and 0.5.19+ (``arg_groups/validation_hook.py``, 0.5.23
  l.500-562): the same two sysfs checks, then ``parse_ib_device_config`` (``mooncake_transfer_engine.py``, 0.5.23
  l.26-75): a string that neither ends in ``.json`` nor starts with ``{`` is one group for "all GPUs"; inline JSON
  is a mapping of GPU id to a group; a ``.json`` path is read from the host's disk. Each group must name a device
  (``No valid IB devices specified for {context}``) and only devices the host has (``Invalid IB devices
  specified for {context}``).

The host facts are the machine snapshot's node facts (``Layout.ib_hosts``: the devices are the ones
``machine/node_probe.py`` found ports of, and whether the directory exists). Each host validates on its own: the
first host (by key) that refuses is reported. Where the snapshot holds no node facts, or does not say whether the
directory exists, or the mapping is a file on the host, or inline JSON the parser itself rejects first, the
entries are NOT JUDGED with a note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.rules_pd import ib_frames
from pytest_gpulayout.refusals import Judged

RULE = "sglang.ib.host_devices"

RULES: Mapping[str, str] = {
    RULE: "--disaggregation-ib-device / --mooncake-ib-device against the serving host's /sys/class/infiniband: "
          "the directory missing or empty, a group naming no device, or a device the host lacks (0.5.9+)",
}

SYSFS = "/sys/class/infiniband"
MISSING = "not os.path.isdir(ib_sysfs_path)"
EMPTY = "len(available_devices) == 0"
INVALID = "len(invalid_devices) != 0"
NO_DEVICES = "not devices"
_TESTS = (MISSING, EMPTY, INVALID, NO_DEVICES)
#: from 0.5.13 the flag may be a per-GPU JSON mapping (``parse_ib_device_config``)
MAPPING_FROM = Version("0.5.13")


def _split(text: str) -> list[str]:
    return [d.strip() for d in text.split(",") if d.strip()]


def groups(device_str: str, listed: Version) -> list[tuple[str, str]] | str:
    """The (context, group) pairs the release checks for ``device_str`` in order, or why they are not known: a
    ``.json`` file on the host, or inline JSON that ``parse_ib_device_config`` refuses itself (0.5.23
    ``mooncake_transfer_engine.py`` l.34-73: a mapping of digit keys to strings, not empty)."""
    text = device_str.strip()
    if listed < MAPPING_FROM or (not text.endswith(".json") and not text.startswith("{")):
        return [("all GPUs", text)]
    if text.endswith(".json"):
        return f"the IB device mapping is read from {text} on the serving host"
    try:
        mapping = json.loads(text)
    except json.JSONDecodeError:
        return "parse_ib_device_config refuses it first (Invalid JSON mapping)"
    if not isinstance(mapping, dict) or not mapping or any(
            not str(k).isdigit() or not isinstance(v, str) for k, v in mapping.items()):
        return "parse_ib_device_config refuses the mapping first"
    return [(f"GPU {int(k)}", v.strip()) for k, v in mapping.items()]


def host_frame(device_str: str, listed: Version, sysfs: bool, available: frozenset[str]) -> dict[str, object] | str:
    """The values the release holds where it refuses on a host with ``available`` devices (``sysfs``: the
    directory exists): every test of the rule decided (at most one true, the first the code reaches), or why the
    groups are not known."""
    frame: dict[str, object] = {t: False for t in _TESTS}
    frame["ib_sysfs_path"] = SYSFS
    frame["sorted(available_devices)"] = sorted(available)
    if not sysfs:
        frame[MISSING] = True
        return frame
    if not available:
        frame[EMPTY] = True
        return frame
    found = groups(device_str, listed)
    if isinstance(found, str):
        return found
    for context, group in found:
        devices = _split(group)
        if not devices:
            frame.update({NO_DEVICES: True, "context": context})
            return frame
        unique = devices if listed < MAPPING_FROM else list(dict.fromkeys(devices))
        invalid = [d for d in unique if d not in available]
        if invalid:
            frame.update({INVALID: True, "context": context, "invalid_devices": invalid})
            return frame
    return frame


def _line_refuses(device_str: str, listed: Version) -> bool:
    """``sglang.pd.ib_devices`` refuses first: those checks precede the sysfs reads in every release (from 0.5.13 a
    blank string; before, no name after splitting on commas, or a name twice)."""
    if listed >= MAPPING_FROM:
        return not device_str.strip()
    devices = _split(device_str)
    return not devices or len(devices) != len(set(devices))


def judge(ask: Ask) -> Judged:
    """The rule for each IB device flag the release validates, host by host (see the module)."""
    if not ask.among([RULE]):
        return Judged()
    frames = [str(f["device_str"]) for f in ib_frames(ask.args)]
    frames = [d for d in frames if not _line_refuses(d, ask.listed)]
    if not frames:
        return Judged()
    hosts = ask.layout.ib_hosts
    if hosts is None:
        return Judged(not_judged=(f"validate_ib_devices ({RULE}): reads the serving host's {SYSFS}; the machine "
                                  "snapshot holds no node facts (an NVML-only snapshot): not probed",))
    refusals = []
    notes: list[str] = []
    for device_str in frames:
        for host, sysfs, available in hosts:
            if sysfs is None and not available:
                notes.append(f"validate_ib_devices ({RULE}): the snapshot does not say whether {SYSFS} exists on "
                             f"{host}")
                continue
            frame = host_frame(device_str, ask.listed, True if sysfs is None else sysfs, available)
            if isinstance(frame, str):
                notes.append(f"validate_ib_devices ({RULE}) on {host}: {frame}")
                continue
            judged = ask.judge(frame, [RULE])
            notes.extend(judged.not_judged)
            if judged.refusals:
                refusals.append(judged.refusals[0])
                break
    return Judged(tuple(refusals), tuple(dict.fromkeys(notes)))
