"""The engine: the sweep, scheduler, pipeline, warm-up, batches, coordinator, partitions, the process."""
