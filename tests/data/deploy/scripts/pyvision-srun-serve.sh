# Source: https://github.com/agents-x-project/PyVision-RL/blob/2fac36bb61b54cb3c5bb7e37c028ada678580520/verl_agents/slurm_scripts/run_serve_llm.sh
# (copied unchanged below this comment)
srun -p eaigc1_t  --gres=gpu:8 --cpus-per-task=1 -n1 --ntasks-per-node=1 --quotatype=reserved --job-name=pyvision \
vllm serve /mnt/petrelfs/zhaoshitian/gveval_zhaoshitian/Qwen2.5-72B-Instruct \
    --port 18901 \
    --gpu-memory-utilization 0.8 \
    --max-model-len 32768 \
    --tensor-parallel-size 8 \
    --served-model-name "judge" \
    --trust-remote-code \
    --disable-log-requests