# A docker run of vLLM's image, as this public script has it:
#   https://github.com/dagnaputra/nlp/blob/41a5ccc95090be43214ea40c1badbd63629d6a9e/scripts/serve_7b_model.sh
# Changed for this example: the image pins a release (v0.10.1, not latest); the model is the positional
# argument, since the image runs `vllm serve`, which 0.8.3-0.11.0 refuse `--model` to (vllm/utils/__init__.py:1779
# in 0.10.1); and a flag typo is planted (--max-modle-len), to show what a refused flag looks like.
# Run: gpulayout check examples/artifacts/shell/serve.sh --machine preset:2xL4-pcie
docker run -d --runtime nvidia --gpus all \
    -v ~/.cache/huggingface:/root/.cache/huggingface \
    -p 9898:8000 \
    --ipc=host \
    vllm/vllm-openai:v0.10.1 \
    Qwen/Qwen2.5-7B-Instruct --max-modle-len 1024 --gpu_memory_utilization 0.9
