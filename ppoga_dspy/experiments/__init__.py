"""What measures the method rather than being it: datasets, metrics, evaluation runs, reports, scripted planners."""
