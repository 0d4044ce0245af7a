"""vLLM's Mamba / hybrid-model and pooling options (``engines/vllm/rules_hybrid.py``): ``--pooler-config``'s own
checks (0.14+), ``--mamba-ssu-algorithm`` without the FlashInfer backend (0.27+) and ``--mamba-block-size`` with
prefix caching turned off (0.11.1+). Each refused case (the release's words, its file:line, its exception) has an
accepted neighbour."""

from __future__ import annotations

import pytest
from vllm_line_cases import LineCase, case_id, judge, layout

POOLER = "vllm.pooler.options"
SSU = "vllm.mamba.ssu_algorithm_backend"
BLOCK = "vllm.mamba.block_size_without_prefix_caching"

CASES = [
    LineCase(POOLER, "0.20.0", '--pooler-config {"logit_scale":0}', layout(),
             refused="logit_scale cannot be 0", source="vllm/config/pooler.py:148"),
    LineCase(POOLER, "0.20.0", '--pooler-config {"logit_scale":2,"logit_sigma":1}', layout(),
             refused="Cannot set both `logit_scale` and `logit_sigma`", source="vllm/config/pooler.py:139"),
    LineCase(POOLER, "0.20.0", '--pooler-config {"logit_bias":2,"logit_mean":1}', layout(),
             refused="Cannot set both `logit_bias` and `logit_mean`", source="vllm/config/pooler.py:125"),
    LineCase(POOLER, "0.20.0", '--pooler-config {"logit_scale":2}', layout()),
    LineCase(POOLER, "0.33.0", '--pooler-config {"logit_sigma":0}', layout(),
             refused="logit_sigma cannot be 0", source="vllm/config/pooler.py:141"),
    LineCase(POOLER, "0.33.0", '--pooler-config {"logit_sigma":0.5}', layout()),
    LineCase(POOLER, "0.14.0", '--pooler-config {"pooling_type":"MEAN","seq_pooling_type":"CLS"}', layout(),
             refused="Cannot set both `pooling_type` and `seq_pooling_type`", source="vllm/config/pooler.py:114"),
    LineCase(POOLER, "0.14.0", '--pooler-config {"pooling_type":"MEAN"}', layout()),
    LineCase(POOLER, "0.33.0", '--pooler-config {"pooling_type":"ALL","tok_pooling_type":"STEP"}', layout(),
             refused="Cannot set both `pooling_type` and `tok_pooling_type`", source="vllm/config/pooler.py:149"),
    LineCase(SSU, "0.27.0", " --mamba-ssu-algorithm simple", layout(),
             refused="only supported with the FlashInfer backend", source="vllm/config/mamba.py:77"),
    LineCase(SSU, "0.27.0", " --mamba-ssu-algorithm simple --mamba-backend flashinfer", layout()),
    LineCase(SSU, "0.33.0", " --mamba-ssu-algorithm vertical", layout(),
             refused="only supported with the FlashInfer backend", source="vllm/config/mamba.py:77"),
    LineCase(SSU, "0.33.0", " --mamba-backend flashinfer --mamba-ssu-algorithm vertical", layout()),
    LineCase(BLOCK, "0.33.0", " --mamba-block-size 64 --no-enable-prefix-caching", layout(),
             refused="--mamba-block-size can only be set with --enable-prefix-caching",
             source="vllm/config/vllm.py:3449"),
    LineCase(BLOCK, "0.33.0", " --mamba-block-size 4096 --max-model-len 4096 --no-enable-prefix-caching",
             layout()),
    LineCase(BLOCK, "0.11.1", " --mamba-block-size 64 --no-enable-prefix-caching", layout(),
             refused="--mamba-block-size can only be set with --enable-prefix-caching",
             source="vllm/config/vllm.py:1064"),
    LineCase(BLOCK, "0.11.1", " --no-enable-prefix-caching", layout()),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case)
