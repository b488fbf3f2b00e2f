"""`ifsweep view`: a read-only web view of a run directory, and its one-file export."""
