"""Checks of a run's plan before it starts: what it trains in, what it needs of the cluster and its servers."""
