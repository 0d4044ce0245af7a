"""The serving engines, one folder each (``vllm/``, ``sglang/``, ``llamacpp/``) implementing
``pytest_gpulayout.engine.Engine``; ``registry.py`` lists them."""
