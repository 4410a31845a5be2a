"""Training backends: fsdp (HF models, CPU and GPU) and megatron."""
