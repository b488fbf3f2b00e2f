"""Coordination: the interfaces the pool sees, and their Redis implementation."""
