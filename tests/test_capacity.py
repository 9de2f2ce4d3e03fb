"""MuJoCo Warp's per-world buffers sized from a model (rlscale.tasks.mjwarp.capacity), on small models built here."""

from __future__ import annotations

import pytest

mujoco = pytest.importorskip("mujoco")

from rlscale.tasks.mjwarp.capacity import Capacity, colliding_pairs, model_capacity  # noqa: E402


def model(bodies: str, option: str = "", extra: str = "") -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(
        f"""<mujoco><option {option}/><worldbody><geom name="floor" type="plane" size="1 1 .1"/>{bodies}</worldbody>
        {extra}</mujoco>"""
    )


BOX = '<body pos="{x} 0 1"><freejoint/><geom name="{name}" type="box" size=".1 .1 .1"/></body>'


def test_each_pair_counts_the_contacts_mujoco_makes_for_it():
    two_boxes = model(BOX.format(x=0, name="a") + BOX.format(x=1, name="b"))
    # floor-box 4 twice, box-box 8: 16 contacts; pyramidal condim 3: 4 rows each
    assert model_capacity(two_boxes) == Capacity(contacts=8 * 3, constraints=8 * 10)  # 20 and 64, with headroom
    assert len(colliding_pairs(two_boxes)) == 3


def test_elliptic_cones_and_joint_limits_change_the_rows():
    sphere = '<body pos="0 0 1"><joint type="slide" axis="0 0 1" range="-1 1"/><geom type="sphere" size=".1"/></body>'
    pyramidal, elliptic = model(sphere), model(sphere, 'cone="elliptic"')
    assert model_capacity(pyramidal) == Capacity(contacts=8, constraints=8)  # 1 contact: 4 rows, 1 limit row
    assert model_capacity(elliptic).constraints == 8  # 3 rows + 1, with headroom
    box = sphere.replace('type="sphere" size=".1"', 'type="box" size=".1 .1 .1"')
    assert model_capacity(model(box)).constraints == 24  # 4 contacts x 4 rows + 1, with headroom


def test_parent_child_and_same_body_pairs_cannot_collide_but_explicit_pairs_can():
    chain = """<body pos="0 0 1"><freejoint/><geom name="a" type="capsule" size=".05 .2"/>
        <geom name="a2" type="sphere" size=".1"/>
        <body pos="0 0 .5"><joint type="hinge"/><geom name="b" type="capsule" size=".05 .2"/></body></body>"""
    free = model(chain)
    names = {tuple(free.geom(g).name for g in pair) for pair in colliding_pairs(free)}
    assert names == {("floor", "a"), ("floor", "a2"), ("floor", "b")}
    no_automatic = chain.replace('type="capsule"', 'type="capsule" contype="0" conaffinity="0"')
    paired = model(no_automatic, extra='<contact><pair geom1="a" geom2="b"/></contact>')
    assert {tuple(paired.geom(g).name for g in pair) for pair in colliding_pairs(paired)} >= {("a", "b")}


@pytest.mark.parametrize(("robot", "expected"), [("go1", Capacity(8, 56)), ("g1", Capacity(16, 120))])
def test_the_robots_capacities_as_docs_robots_md_gives_them(robot, expected):
    from importlib import resources

    text = resources.files("rlscale.tasks.locomotion").joinpath("assets", f"{robot}.xml").read_text()
    assert model_capacity(mujoco.MjModel.from_xml_string(text)) == expected
