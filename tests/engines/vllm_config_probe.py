"""Run inside the CPU vLLM's own Python (``tests/engines/test_vllm_config_checks_real.py``): each run goes through
the release's front door for ``vllm serve`` up to the engine's config and no further, on a config-only model
folder (no weights, nothing downloaded); what each run met is written as JSON to OUT (vLLM logs on stdout).

- ``words``: the command line as ``vllm serve`` reads it (vllm/entrypoints/cli/main.py: a
  ``FlexibleArgumentParser`` with the ``serve`` subcommand's ``make_arg_parser``, ``parse_args``, the
  subcommand's ``validate``, then ``ServeSubcommand.cmd``); the launchers ``cmd`` hands the arguments to
  (``run_server``, ``run_headless``, ``run_multi_api_server``, ``run_dp_supervisor``) are replaced by what each
  does first: ``AsyncEngineArgs.from_cli_args(args).create_engine_config(usage_context=OPENAI_API_SERVER)``
  (``headless=True`` for ``run_headless``), so no socket is bound and no engine started;
- ``kwargs``: ``AsyncEngineArgs(model=folder, **kwargs).create_engine_config(...)`` (destinations, no words).

Each outcome: ``accepted``; ``parse`` (the parser exited: its message); ``unknown`` (a destination the release's
``EngineArgs`` lacks); ``raised``: the exception's type and text and where it was raised (``file:line`` under the
site-packages folder, and the innermost frame inside vllm). From 0.11 the config classes are pydantic dataclasses:
the release's own exception is the ``ctx.error`` of the ``ValidationError`` and its frames are read there.

    python vllm_config_probe.py RUNS.json OUT.json
"""

import contextlib
import dataclasses
import io
import json
import os
import sys
import traceback


def _where(exc):
    """(innermost frame, innermost frame inside the vllm package) as ``path:line`` relative to site-packages."""
    import vllm

    root = os.path.dirname(os.path.dirname(vllm.__file__))
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []

    def rel(f):
        return f"{os.path.relpath(f.filename, root)}:{f.lineno}"

    inner = rel(frames[-1]) if frames else ""
    in_vllm = [f for f in frames if os.path.relpath(f.filename, root).startswith("vllm" + os.sep)]
    return inner, (rel(in_vllm[-1]) if in_vllm else ""), (in_vllm[-1].name if in_vllm else "")


def _raised(exc):
    own = exc
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ == "ValidationError" and callable(errors):
        for err in errors():
            inner = (err.get("ctx") or {}).get("error")
            if isinstance(inner, BaseException):
                own = inner
                break
    at, vllm_at, function = _where(own)
    return {"outcome": "raised", "type": type(own).__name__, "wrapper": type(exc).__name__,
            "text": str(exc), "own_text": str(own), "at": at, "vllm_at": vllm_at, "function": function}


def main():
    import vllm
    import vllm.entrypoints.cli.serve as serve
    from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cli_env_setup()

    def front_door():
        """vllm/entrypoints/cli/main.py's parser with the serve subcommand: built afresh for each run, as each
        ``vllm serve`` builds its own (a parse's defaults are objects the engine arguments then change:
        ``EngineArgs.__post_init__`` sets ``aux_output_config.enable_return_routed_experts`` on the parser's
        default, engine/arg_utils.py:866-869 in 0.32.0)."""
        parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")  # the console script's name
        subparsers = parser.add_subparsers(required=False, dest="subparser")
        command = serve.ServeSubcommand()
        command.subparser_init(subparsers).set_defaults(dispatch_function=command.cmd)
        return parser, command

    launched = []

    def configure(args, headless=False):
        engine_args = vllm.AsyncEngineArgs.from_cli_args(args)
        engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER, headless=headless)

    def launcher(name, headless=False):
        def run(args, *_, **__):
            launched.append(name)
            configure(args, headless)
        return run

    async def run_server(args, *_, **__):
        launched.append("run_server")
        configure(args)

    serve.run_server = run_server
    serve.run_headless = launcher("run_headless", headless=True)
    serve.run_multi_api_server = launcher("run_multi_api_server")
    serve.run_dp_supervisor = launcher("run_dp_supervisor")
    fields = {f.name for f in dataclasses.fields(vllm.AsyncEngineArgs)}

    runs = json.load(open(sys.argv[1]))
    out = {}
    for run in runs:
        launched.clear()
        said = io.StringIO()
        try:
            if run["kind"] == "words":
                parser, command = front_door()
                with contextlib.redirect_stderr(said):
                    args = parser.parse_args(["serve", run["folder"], *run["words"]])
                command.validate(args)
                args.dispatch_function(args)
            else:
                unknown = sorted(set(run["kwargs"]) - fields)
                if unknown:
                    out[run["id"]] = {"outcome": "unknown", "text": ", ".join(unknown)}
                    continue
                vllm.AsyncEngineArgs(model=run["folder"], **run["kwargs"]).create_engine_config(
                    usage_context=UsageContext.OPENAI_API_SERVER)
            out[run["id"]] = {"outcome": "accepted", "launcher": launched[-1] if launched else ""}
        except SystemExit as exc:
            lines = said.getvalue().strip().splitlines()
            start = max([i for i, line in enumerate(lines) if ": error: " in line] or [0])
            out[run["id"]] = {"outcome": "parse", "text": lines[-1] if lines else "", "code": str(exc.code),
                              "full": "\n".join(lines[start:])}  # a multi-line error: pydantic's, while parsing
        except Exception as exc:  # the release's refusal, whatever wraps it (pydantic from 0.11)
            out[run["id"]] = {**_raised(exc), "launcher": launched[-1] if launched else ""}
    with open(sys.argv[2], "w") as fh:
        json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
