# Source: https://github.com/claireg808/NLP_knowledge_graph/blob/5f211acfe68cffd738744946176330f0c12919b2/run.sh
# Rewritten from that job script (not copied): its #SBATCH GPU request (a typed gres, gpu:80g:1) and the serve line.
#!/bin/bash
#SBATCH --job-name=ds
#SBATCH --gres=gpu:80g:1
#SBATCH --mem=100G
#SBATCH --qos=short
module load python/3.11 cuda/12.4
source ds_kg_venv/bin/activate

vllm serve deepseek-ai/DeepSeek-R1-Distill-Qwen-32B --max-model-len 35904
