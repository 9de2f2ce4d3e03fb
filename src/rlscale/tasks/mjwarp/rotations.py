"""Quaternion rotations of batched torch vectors, as the MuJoCo Warp tasks' MDPs read the base's frame."""

from __future__ import annotations

import torch


def quat_rotate_inverse(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate world-frame vectors ``(..., 3)`` into the body frames of unit quaternions ``(w, x, y, z)``."""
    w, xyz = quat[..., :1], quat[..., 1:]
    return (
        vec * (2.0 * w * w - 1.0)
        - 2.0 * w * torch.linalg.cross(xyz, vec)
        + 2.0 * xyz * (xyz * vec).sum(-1, keepdim=True)
    )


def quat_rotate(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate body-frame vectors ``(..., 3)`` into the world frame by unit quaternions ``(..., 4)``."""
    w, xyz = quat[..., :1], quat[..., 1:]
    return (
        vec * (2.0 * w * w - 1.0)
        + 2.0 * w * torch.linalg.cross(xyz, vec)
        + 2.0 * xyz * (xyz * vec).sum(-1, keepdim=True)
    )
