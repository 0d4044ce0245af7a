"""TensorRT-LLM (``trtllm-serve``, the PyTorch backend of 1.x): everything that is TensorRT-LLM's."""
