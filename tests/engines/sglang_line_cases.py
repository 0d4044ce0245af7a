"""An SGLang line's verdict for one rule, as the config-check test modules state it: refused by the rule in the
release's words (a part of its message, its exception, the release that raised it, its file:line), or not
refused by it at all."""

from __future__ import annotations

from pytest_gpulayout.refusals import Judged


def assert_verdict(judged: Judged, rule: str, refused: str | None, *, exception: str, version: str,
                   source: str = "") -> None:
    """``judged`` refuses by ``rule`` in words holding ``refused`` (the refusal of the rule that holds them, else
    its first), or (``refused`` None) does not refuse by ``rule``."""
    mine = [r for r in judged.refusals if r.rule == rule]
    if refused is None:
        assert not mine, [r.text("SGLang") for r in mine]
        return
    assert mine, (judged.refusals, judged.not_judged)
    r = next((r for r in mine if refused in r.message), mine[0])
    assert refused in r.message, [x.message for x in mine]
    assert (r.exception, r.release) == (exception, version)
    if source:
        assert r.source == source
