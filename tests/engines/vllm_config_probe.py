"""Run inside the CPU vLLM's own Python (``tests/engines/test_vllm_config_checks_engine.py``): build each case's
``EngineArgs`` on a config-only model folder and call ``create_engine_config``, the code path ``vllm serve``
takes before it loads anything; write what each case raised as JSON to OUT (vLLM logs on stdout).

    python vllm_config_probe.py CASES.json OUT.json
"""

import json
import sys


def main() -> int:
    from vllm.engine.arg_utils import EngineArgs

    cases = json.load(open(sys.argv[1]))
    out = {}
    for name, kwargs in cases.items():
        try:
            EngineArgs(**kwargs).create_engine_config()
            out[name] = None
        except Exception as exc:  # the release's refusal, whatever wraps it (pydantic from 0.11)
            out[name] = {"type": type(exc).__name__, "text": str(exc)}
    with open(sys.argv[2], "w") as fh:
        json.dump(out, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
