"""Plots and widgets shared by the notebooks."""
