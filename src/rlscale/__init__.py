"""rlscale: reproducible multi-GPU and multi-node RL training and scaling studies."""

__version__ = "0.1.0"
