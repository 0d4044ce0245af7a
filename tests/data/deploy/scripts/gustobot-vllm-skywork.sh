#!/bin/bash
# Source: https://github.com/jhlu2019/GustoBot/blob/c393d4f0b585d84261fa6e9c0b84aed90c464cf5/scripts/vllm_start_Skywork-R1V3.sh
# (copied unchanged below this comment)
export MODELSCOPE_CACHE=/data/models
export VLLM_USE_MODELSCOPE=true

/home/kdsoft/miniconda3/envs/vllm-0.10.1/bin/vllm serve /data/models/Skywork-R1V3-38B \
  --trust_remote_code \
  --tensor-parallel-size 4 \
  --gpu-memory-utilization 0.5 \
  --port 8002 \
  --max-model-len 16384\
  --served-model-name Skywork-R1V3-38B \
  --api-key vR4TUrqfZ6n6YTgKzTNnHCZMtUab6EuI3FORzTpfARyoezkQZpyHMxbe
