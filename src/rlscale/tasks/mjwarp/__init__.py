"""MuJoCo Warp physics behind the :class:`~rlscale.tasks.base.VecTask` interface (extra ``rlscale[warp]``).

The backend (:mod:`rlscale.tasks.mjwarp.backend`) imports Warp and MuJoCo Warp, so a task imports it only when it is
built (:func:`rlscale.tasks.physics.require_engine` first); :mod:`rlscale.tasks.mjwarp.capacity` sizes the contact
and constraint buffers from the model.
"""
