"""dbcrew kernel: what every layer shares (settings, models, targets, workspace, brains).

The kernel imports none of the top-level folders (flows, roles, operators, error_tree, prompts):
dependencies point down, from flows to roles to operators to here.
"""

__version__ = "0.1.0"
