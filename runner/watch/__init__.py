"""What a person watches: live progress, the board, the ETA, status, outcomes."""
