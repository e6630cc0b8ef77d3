"""The review crew: the run's context and phase steps, the planner and re-planner, the workers, the monitor, memory."""
