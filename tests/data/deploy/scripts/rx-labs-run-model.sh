# Source: https://github.com/rrrepos/rx-labs/blob/43a46570172667fc96c84efce095ced4ef602bd1/scripts/run-model.sh
# (copied unchanged below this comment)
MODEL="meta-llama/Meta-Llama-3-8B-Instruct" 

docker run --runtime nvidia --gpus all \
    -v ~/.cache/huggingface:/root/.cache/huggingface \
    --env-file "docker.env" \
    -p 8000:8000 \
    --ipc=host \
    vllm/vllm-openai:latest \
    --model $MODEL
