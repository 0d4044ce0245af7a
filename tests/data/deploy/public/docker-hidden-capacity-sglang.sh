# Source: https://github.com/dmitrymailk/hidden_capacity_reasoning/blob/7161ef93155aa34ea2fc42a6c7350d5d127083da/sglang.sh
# Rewritten from that script (not copied): the model in a shell variable, docker run with a pinned SGLang image.
volume=$PWD/data
model=deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B
docker run -d -ti --rm --gpus all --shm-size 1g --ipc=host \
    -p 1337:30000 -v $volume:/root/.cache/huggingface -v ./:/code -w /code \
    lmsysorg/sglang:v0.4.5-cu125 \
    python3 -m sglang.launch_server --model-path $model --host 0.0.0.0 --port 30000
