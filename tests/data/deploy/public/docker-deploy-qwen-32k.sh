# Source: https://github.com/jackypanster/deploy-qwen/blob/f8da8ae402b005fb319de736312816388f4a2539/deploy-32k.sh
# Rewritten from that script (not copied): docker run of vllm/vllm-openai:v0.8.5 with TP=4 on a local
# Qwen3-30B-A3B and the flags it passes (--swap-space and --tokenizer-pool-size, which 0.8.5 still takes).
#!/bin/bash
docker run -d --runtime=nvidia --gpus=all --name coder \
  -v /home/llm/model/qwen/qwen3-30b-a3b:/qwen/qwen3-30b-a3b \
  -p 8000:8000 --ulimit memlock=-1 --ulimit stack=67108864 --restart always --ipc=host \
  vllm/vllm-openai:v0.8.5 \
  --model /qwen/qwen3-30b-a3b \
  --served-model-name coder \
  --tensor-parallel-size 4 \
  --dtype half \
  --max-model-len 32768 \
  --max-num-batched-tokens 4096 \
  --gpu-memory-utilization 0.93 \
  --block-size 32 \
  --enable-chunked-prefill \
  --swap-space 16 \
  --tokenizer-pool-size 56 \
  --disable-custom-all-reduce
