# Source: https://github.com/YangZhou08/LongBench/blob/02549103f12464c3d5c5c81111665fe8a28c4b6b/launchserver.sh
# (copied unchanged below this comment)
# python -m sglang.launch_server \
#     --model-path YangZhoumill/scratch_234567_step360 \
#     --port 30003 \
#     --host 0.0.0.0   # Explicitly enabling Data Parallelism with 8 GPUs 

python -m sglang.launch_server \
    --model Qwen/Qwen2.5-1.5B-Instruct \
    --port 30004 \
    --dp-size 4 \
    --host 0.0.0.0 
