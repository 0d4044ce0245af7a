# Source: https://github.com/raunak-sood2003/pragmatic-code-generation/blob/10a3314e171c7716f25a14ded39b77c52b66eb52/vLLM/codellama13b_vllm_server.sh
# (copied unchanged below this comment)
#!/bin/bash
#SBATCH --job-name=codellama_vllm
#SBATCH --output=codellama_vllm.out
#SBATCH --error=codellama_vllm.err
#SBATCH --gres=gpu:A6000:1
#SBATCH --mem=128G
#SBATCH --time=10:00:00

python3 -m vllm.entrypoints.openai.api_server --model codellama/CodeLlama-13b-hf --port 8070 --tensor-parallel-size 1 --max-num-seqs 2000