"""The store: append-only shards, their key index, the manifest, compaction, verification, keys."""
