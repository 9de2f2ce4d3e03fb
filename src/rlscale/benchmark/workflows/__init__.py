"""The benchmark workflows, one module each (its record ``WORKFLOW``: options, refusals, run, console lines), and
:data:`WORKFLOWS`, the one list of them; nothing else branches on a workflow's name.

A new workflow is a module here, built like :mod:`.startup`, and one entry below (docs/architecture.md, "A new
benchmark workflow").
"""

from __future__ import annotations

from rlscale.benchmark.workflow import Workflow
from rlscale.benchmark.workflows import runtime, startup, training

WORKFLOWS: dict[str, Workflow] = {module.WORKFLOW.name: module.WORKFLOW for module in (startup, runtime, training)}
"""The workflows by name, in the order help text lists them."""
