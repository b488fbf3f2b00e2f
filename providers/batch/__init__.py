"""Batch mode: the batch endpoint, the providers' Batch API clients, batched remote operations."""
