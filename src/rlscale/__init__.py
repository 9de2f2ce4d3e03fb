"""rlscale: reproducible multi-GPU and multi-node RL training and scaling studies."""
