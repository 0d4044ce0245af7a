"""``gpulayout measure``: the speed half of "split or copy", measured on the real engine under load.

Each deployment is launched to ready (the startup check's launcher: containment, GPU locks,
progress), warmed up and driven by a load generator while the server stays up; then its whole tree
is stopped as always, and the next deployment runs on the same GPUs. Every layout is launched
``launches`` times, interleaved (A B B A), a launch being the unit the 95 % intervals of the deciding
figure (goodput under the SLO as ``vllm bench serve --goodput`` counts it, else output tokens/s) are
computed from; the best two are launched again while their interval overlaps 1 and the budget allows
(``run.py``).

**The load generator is vLLM's own ``vllm bench serve``** (``vllm.benchmarks.serve``), chosen over
NVIDIA's ``aiperf`` and ``guidellm`` because:

- it is already installed wherever a vLLM deployment is measured (it ships in the engine's
  environment, and is run with the engine's own Python: no second stack to install, nothing new in
  pytest-gpulayout's environment); ``guidellm`` 0.8 pulls in torch, transformers and datasets,
  ``aiperf`` 0.13 some forty packages (dash, kubernetes, matplotlib, pandas, scipy, ...);
- it speaks the OpenAI completions API (``--backend openai``), which vLLM, SGLang and llama-server
  all serve, with streaming, so first-token and inter-token times are real;
- it runs offline: ``--tokenizer`` takes a local directory, its ``random`` dataset needs no
  download (``--ignore-eos`` forces the output length) and its ``timed_trace`` dataset replays a
  JSONL trace of request shapes and arrival times;
- with ``--save-result --save-detailed`` it writes one JSON file with the aggregates and the
  per-request times (TTFT, every ITL, end-to-end latency, errors), which ``result.py`` parses and
  checks against: the figures here are recomputed from those per-request times.

It is started with an argument vector, never a shell, in a process group of its own that dies with
this process (``PR_SET_PDEATHSIG``), bounded in time, and killed with its group on every way out.
The verb needs no extra Python package; the ``measure`` extra (``pytest-gpulayout[measure]``) adds
``nvidia-ml-py`` for the clock sampling on GPUs, imported lazily.
"""
