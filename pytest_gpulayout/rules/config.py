"""``config``: the engine's front door. Does this release take the command line, and does its configuration
stage accept what the line, the model and the layout make of it?

A launch that the release refuses before it sizes any memory is the commonest false pass: a flag the release
removed (``--swap-space`` after vLLM 0.17.1), misspelt or ambiguous (``--max-num``), a switch given a value
(``--enforce-eager=true``), a batch smaller than ``max_num_seqs``, EPLB without expert parallel, PP on a model
class without ``SupportsPP``. The line is the deployment's (its keys as the engine's flags, then
``launch.args``; an artifact's own line as written), read once by the release's own parser
(``Subject.args``: ``engines/<name>/cli.py resolve``, rebuilt from the wheel's tables). Its refusal is the
release's argparse line, word for word; a config-time refusal is the release's exception with its values
filled in and its ``file:line`` (``engines/<name>/config_checks.py``, over the ledger of every ``raise`` of
its config classes: ``tools/config_ledger.py``). What the rules could not judge is said, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_gpulayout.check import Rule
from pytest_gpulayout.engine import Subject, config_reader
from pytest_gpulayout.findings import ABSENT, Absent, Facts, Finding, Status, failed, passed, register_facts

CHECK = "config"


@register_facts("config")
@dataclass(frozen=True)
class ConfigFacts(Facts):
    """What the release made of the command line. ``release``: the release whose parser and rules judged it
    (``release_note``: the nearest one shipped below the release asked for, where it is not that one)."""

    release: str
    accepted: bool
    refusals: tuple[str, ...] = ()
    not_judged: tuple[str, ...] = ()
    deprecated: tuple[str, ...] = ()
    release_note: str = ""
    command: tuple[str, ...] = ()
    #: the flags whose value the release converts with a type function of its own that is not rebuilt here (absent:
    #: none)
    unchecked: tuple[str, ...] | Absent = ABSENT


def _sentence(text: str) -> str:
    """``text`` ending as a sentence ends (the engine's words keep their own final mark), on one line (a
    message of several lines, vLLM's world-size refusal, has its lines joined)."""
    text = re.sub(r"\s*\n\s*", " ", text.strip())
    return text if text.endswith((".", "?", "!")) else text + "."


def _where(s: Subject) -> str:
    origin = s.dep.origin
    if origin is not None and origin.via:
        return f"{origin.via} in {origin.source}"
    return f"the command line in {origin.source}" if origin is not None else "launch.args (or the key it sets)"


def _unset(names: tuple[str, ...], fields: bool = False) -> str:
    """What an artifact leaves unset, said as such (the text the line keeps in their place); ``fields``: values of
    a configuration file rather than a command line's variables."""
    shown = ", ".join(names)
    one = len(names) == 1
    if fields:
        return (f"{shown} {'is' if one else 'are'} not filled in: the artifact leaves {'it' if one else 'them'} open, "
                f"so {'it was' if one else 'they were'} not judged")
    return (f"{shown} {'is' if one else 'are'} set by nothing in the artifact: give {'it' if one else 'them'} in the "
            f"container's env (or set {'it' if one else 'them'} in the script before the line)")


def _workers(s: Subject) -> list[str]:
    """Each worker pod's line that the release refuses (the group never starts), in the release's words."""
    origin = s.dep.origin
    out: list[str] = []
    for w in origin.workers if origin is not None else ():
        r = s.engine.cli.resolve_args(w.args, s.version, read=config_reader(s.dep))
        if not r.ok:
            unset = [u for u in w.unknown if u in r.refusal()]
            out.append(f"the worker's line in {w.source}: " + (f"{_unset(tuple(unset))}; " if unset else "")
                       + _sentence(r.refusal()))
    return out


def _what(s: Subject) -> str:
    """What the release reads: its command line, or the fields a framework hands it (Ray Serve LLM's)."""
    origin = s.dep.origin
    return origin.via if origin is not None and origin.via else "the command line"


def check_config(s: Subject) -> Finding:
    a, engine = s.args, s.engine
    who = f"{engine.display} {a.release}" if a.release else engine.display
    note = f" ({a.release_note})" if a.release_note else ""
    facts = ConfigFacts(release=a.release, accepted=a.ok, deprecated=a.deprecated, release_note=a.release_note,
                        command=a.args)
    origin = s.dep.origin
    unknown = origin.unknown if origin is not None else ()
    fields = origin is not None and bool(origin.via)
    workers = _workers(s)
    if origin is not None and not s.dep.model:
        flag = f" or with {engine.cli.flags.model}" if engine.cli.flags.model else ""
        refused = f" {who}{note} also refuses it: {_sentence(a.refusal())}" if not a.ok else ""
        return failed(CHECK, f"{_where(s)} names no model: give it as the first argument{flag}"
                             + (f"; {_unset(unknown)}" if unknown else "") + "." + refused,
                      ConfigFacts(release=a.release, accepted=a.ok, refusals=("no model", *a.errors[:1]),
                                  release_note=a.release_note, command=a.args))
    missing = s.model_missing
    if missing is not None:  # the engine reads the model's config before anything else: it cannot start
        refused = f" It also refuses {_what(s)}: {_sentence(a.refusal())}" if not a.ok else ""
        others = f" And {'; '.join(workers)}" if workers else ""
        unset = tuple(u for u in unknown if u in s.dep.model or u in a.refusal())
        lead = f"{_unset(unset, fields)}, so " if unset else ""
        return failed(CHECK, f"{lead}{engine.display} cannot read the model: {_sentence(str(missing))}{refused}"
                             f"{others}",
                      ConfigFacts(release=a.release, accepted=a.ok, refusals=(str(missing), *a.errors[:1]),
                                  release_note=a.release_note, command=a.args))
    if not a.ok:
        facts = ConfigFacts(release=a.release, accepted=False, refusals=(a.refusal(), *workers),
                            release_note=a.release_note, command=a.args)
        unset = tuple(u for u in unknown if u in a.refusal())
        lead = f"{_unset(unset, fields)}, so " if unset else ""
        others = f" And {'; '.join(workers)}" if workers else ""
        return failed(CHECK, f"{lead}{who}{note} refuses {_what(s)} before it starts: {_sentence(a.refusal())} "
                             f"Fix {_where(s)}.{others}", facts)
    if workers:
        return failed(CHECK, f"{who}{note} takes the leader's command line but refuses "
                             + "; and ".join(workers), ConfigFacts(release=a.release, accepted=False,
                                                                   refusals=tuple(workers),
                                                                   release_note=a.release_note, command=a.args))
    judged = engine.rules.config_check(s)
    if judged is not None and judged.refusals:
        texts = tuple(_sentence(r.text(engine.display))[:-1] for r in judged.refusals)
        facts = ConfigFacts(release=a.release, accepted=True, refusals=texts, not_judged=judged.not_judged,
                            deprecated=a.deprecated, release_note=a.release_note, command=a.args)
        more = f" Then, once that is fixed: {_sentence('; '.join(texts[1:]))}" if len(texts) > 1 else ""
        return failed(CHECK, f"{who}{note} takes {_what(s)} but refuses its configuration: "
                             f"{_sentence(texts[0])}{more}", facts)
    parts = [f"{who}{note} takes {_what(s)}"]
    status = Status.PASS
    if judged is None:
        parts.append(f"its config-time checks are not modelled for {engine.display}")
    else:
        facts = ConfigFacts(release=a.release, accepted=True, not_judged=(*judged.not_judged, *a.not_read),
                            deprecated=a.deprecated, release_note=a.release_note, command=a.args,
                            unchecked=a.unchecked or ABSENT)
        parts.append("none of its modelled config-time refusals holds")
        if judged.not_judged:  # a refusal whose conditions read what no input gives: it may hold, so no pass
            status = Status.WARN
            parts.append(f"not judged, so the release may still refuse it: {'; '.join(judged.not_judged)}")
    for why in a.not_read:  # SGLang's --config FILE in a container: the line was judged without its keys
        status = Status.WARN
        parts.append(f"{why}: the keys it sets (TP / PP / DP, the memory fraction, the context length, the pool "
                     f"flags, ...) were not judged, so the placement, heads, memory and config checks judged the "
                     f"line without them; check the file with the manifest (launch.args: [--config, FILE])")
    for why in a.ignored:  # --config=FILE: parsed, never merged
        status = Status.WARN
        parts.append(why)
    if a.unchecked:  # a type function of the release's own that is not rebuilt: its value was taken as written
        status = Status.WARN
        parts.append(f"the release converts {', '.join(a.unchecked)} with a function of its own that is not "
                     f"modelled: a value it refuses at parse time is not refused here")
    if unknown:
        status = Status.WARN
        parts.append(_unset(unknown, fields) if fields else f"{_unset(unknown)}: their text was judged as written")
    if a.deprecated:
        status = Status.WARN
        parts.append(f"deprecated in this release: {', '.join(a.deprecated)} (a later release may refuse "
                     f"{'them' if len(a.deprecated) > 1 else 'it'})")
    text = "; ".join(parts) + "."
    return passed(CHECK, text, facts) if status is Status.PASS else Finding(CHECK, status, text, facts)


def _number(f: Finding) -> str:
    facts = f.facts
    assert isinstance(facts, ConfigFacts)
    return facts.release


CONFIG = Rule(CHECK, "Does the release take the command line (its own parser, flag by flag) and accept what it, "
              "the model and the layout make of its configuration (its config-time refusals)?", ConfigFacts,
              check_config, _number)
