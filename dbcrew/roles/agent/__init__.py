"""The agent loop that ask's look-ups and the diagnosis's LLM experts both run on: RCAgent's controller
(controller.py), D-Bot's tree search (tree.py), the limits and their tally (budget.py), long observations
behind snapshot keys (snapshots.py) and the process's response cache (cache.py).

It knows neither of its users: what a loop is for (its prompts, its final action) comes in as an
`Agenda`, what it may call as a `Toolbox` (an import-linter contract keeps it from importing them).
"""
