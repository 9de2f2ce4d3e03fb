"""How many contacts and constraint rows one world of a MuJoCo model can need: MuJoCo Warp's buffers are fixed.

MuJoCo Warp allocates its contact and constraint arrays once, per world. Too small, and it drops contacts (and
flags an overflow); far too large, and memory and solver time grow. The counts come from the model: every geom pair
that can collide (``contype``/``conaffinity``, explicit ``<pair>``s, less same-body, parent-child and excluded pairs),
times the contacts MuJoCo makes for such a pair, and the constraint rows those contacts and the joint limits,
equalities and friction losses take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco

_GEOM = mujoco.mjtGeom
PLANE_CONTACTS = {
    int(_GEOM.mjGEOM_SPHERE): 1,
    int(_GEOM.mjGEOM_ELLIPSOID): 1,
    int(_GEOM.mjGEOM_CAPSULE): 2,
    int(_GEOM.mjGEOM_CYLINDER): 4,
    int(_GEOM.mjGEOM_BOX): 4,
}
"""Most contacts MuJoCo makes between a plane and a geom of each type."""
PAIR_CONTACTS = {
    frozenset((int(_GEOM.mjGEOM_SPHERE),)): 1,
    frozenset((int(_GEOM.mjGEOM_SPHERE), int(_GEOM.mjGEOM_CAPSULE))): 1,
    frozenset((int(_GEOM.mjGEOM_CAPSULE),)): 2,
}
"""Most contacts between two non-plane geoms of these types; any other pair counts :data:`OTHER_PAIR_CONTACTS`."""
OTHER_PAIR_CONTACTS = 8
EQUALITY_ROWS = {
    mujoco.mjtEq.mjEQ_CONNECT: 3,
    mujoco.mjtEq.mjEQ_WELD: 6,
    mujoco.mjtEq.mjEQ_JOINT: 1,
    mujoco.mjtEq.mjEQ_TENDON: 1,
}
HEADROOM = 1.25
"""Both capacities are raised by this factor (then to a multiple of 8): a model's counts are bounds for the pairs
above, but guesses for meshes and the other pair types."""


@dataclass(frozen=True)
class Capacity:
    """Per-world buffer sizes for :func:`mujoco_warp.put_data` (``nconmax``, ``njmax``)."""

    contacts: int
    constraints: int


def _with_headroom(count: int) -> int:
    return max(8, 8 * math.ceil(count * HEADROOM / 8))


def colliding_pairs(model: mujoco.MjModel) -> list[tuple[int, int]]:
    """Geom pairs that MuJoCo's collision detection can test: explicit pairs, and the filtered automatic ones."""
    pairs = {tuple(sorted((int(a), int(b)))) for a, b in zip(model.pair_geom1, model.pair_geom2, strict=True)}
    excluded = {int(signature) for signature in model.exclude_signature}
    filter_parent = not model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    for first in range(model.ngeom):
        for second in range(first + 1, model.ngeom):
            if not (
                model.geom_contype[first] & model.geom_conaffinity[second]
                or model.geom_contype[second] & model.geom_conaffinity[first]
            ):
                continue
            body1, body2 = sorted(int(model.geom_bodyid[g]) for g in (first, second))
            weld1, weld2 = int(model.body_weldid[body1]), int(model.body_weldid[body2])
            if weld1 == weld2 or (body1 << 16) + body2 in excluded:
                continue
            parent1, parent2 = (int(model.body_weldid[model.body_parentid[weld]]) for weld in (weld1, weld2))
            if filter_parent and weld1 and weld2 and (parent1 == weld2 or parent2 == weld1):
                continue
            pairs.add((first, second))
    return sorted(pairs)


def contacts_of_pair(model: mujoco.MjModel, first: int, second: int) -> int:
    """Most contacts MuJoCo makes between the two geoms."""
    types = (int(model.geom_type[first]), int(model.geom_type[second]))
    plane = int(_GEOM.mjGEOM_PLANE)
    if plane in types:
        other = types[1] if types[0] == plane else types[0]
        return PLANE_CONTACTS.get(other, OTHER_PAIR_CONTACTS)
    return PAIR_CONTACTS.get(frozenset(types), OTHER_PAIR_CONTACTS)


def _condim(model: mujoco.MjModel, first: int, second: int) -> int:
    """The pair's contact dimension: the higher-priority geom's, or the larger one at equal priority."""
    priority = model.geom_priority
    if priority[first] != priority[second]:
        return int(model.geom_condim[first if priority[first] > priority[second] else second])
    return int(max(model.geom_condim[first], model.geom_condim[second]))


def rows_per_contact(model: mujoco.MjModel, condim: int) -> int:
    if condim == 1:
        return 1
    return condim if model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC else 2 * (condim - 1)


def model_capacity(model: mujoco.MjModel) -> Capacity:
    """Contacts and constraint rows one world of ``model`` can need at once, with :data:`HEADROOM`."""
    contacts = contact_rows = 0
    for first, second in colliding_pairs(model):
        count = contacts_of_pair(model, first, second)
        contacts += count
        contact_rows += count * rows_per_contact(model, _condim(model, first, second))
    limits = int(model.jnt_limited.sum()) + int(model.tendon_limited.sum())
    friction = int((model.dof_frictionloss > 0).sum()) + int((model.tendon_frictionloss > 0).sum())
    equalities = sum(EQUALITY_ROWS.get(kind, 6) for kind in model.eq_type)
    return Capacity(_with_headroom(contacts), _with_headroom(contact_rows + limits + friction + equalities))
