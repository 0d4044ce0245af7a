# Source: https://github.com/thomas-roth/iTRAP/blob/0a1df17507cfbbde0d89321e73881d9ef90e2484/iTRAP/models/Qwen2-VL/start_vlm_server.sh
# (copied unchanged below this comment)
CUDA_VISIBLE_DEVICES=0 python -m vllm.entrypoints.openai.api_server \
 --model /home/troth/bt/iTRAP/iTRAP/models/Qwen2-VL/pretrained/qwen2_vl_lora_sft_calvin \
 --host 0.0.0.0 --port 8000 \
 --gpu-memory-utilization 0.5 --max-model-len 32768 \
 --served-model-name qwen2-vl
 