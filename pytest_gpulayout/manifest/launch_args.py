"""``launch.args`` read with the engine's own spelling rules (``Engine.parse_args``): a flag a manifest key
owns, the launcher's ``--host`` / ``--port`` and ``--load-format`` with dummy weights are refused in any
spelling the engine takes (``--tensor_parallel_size``, ``--tensor-para``, ``-tp``, ``--hos=0.0.0.0``), not
only the one spelled out in the engine's documentation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.inputs.engine_args import loopback, owned_flags
from pytest_gpulayout.inputs.values import Ctx


def check_launch_args(ctx: Ctx, engine_name: str, args: Sequence[str], prefix: str, *,
                      owners: Mapping[str, str], launcher: Sequence[str], dummy: bool) -> None:
    """Fail on the first flag of ``args`` that the manifest or the launcher owns (see the module)."""
    engine = get_engine(engine_name)
    parsed = engine.cli.parse_args(args)
    owned = owned_flags(parsed.table, owners)
    launcher_flags = {parsed.table.canonical(f) or f: f for f in launcher}
    load_format = parsed.table.canonical("--load-format")
    for i, arg in enumerate(args):  # another engine's spelling of an owned flag, which this one does not take
        literal = arg.split("=", 1)[0]
        if arg in parsed.unknown and literal in owners:
            ctx.fail(f"{prefix}.launch.args[{i}]", f"sets {literal}, which the manifest key '{owners[literal]}' "
                     f"controls: set {owners[literal]} instead, so the static checks judge the layout the engine "
                     "will run")
    for g in parsed.given:
        arg_key = f"{prefix}.launch.args[{g.index}]"
        if g.flag in owned:
            owner = owned[g.flag]
            ctx.fail(arg_key, f"sets {g.show()}, which the manifest key '{owner}' controls: set {owner} instead, "
                              "so the static checks judge the layout the engine will run")
        if g.flag in launcher_flags:
            if g.flag == (parsed.table.canonical("--host") or "--host") and g.value and not loopback(g.value):
                ctx.fail(arg_key, f"sets {g.show()} to {g.value}: {engine.display} would listen beyond loopback; "
                                  "the launcher listens on 127.0.0.1 only, on a free port it picks")
            ctx.fail(arg_key, f"sets {g.show()}: the launcher listens on 127.0.0.1 only, on a free port it picks")
        if load_format is not None and g.flag == load_format and dummy:
            ctx.fail(arg_key, f"sets {g.show()}, but launch.dummy_weights is true (it passes "
                              "--load-format dummy); set dummy_weights: false to choose the load format")

