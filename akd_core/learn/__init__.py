"""Policies trained on tracked motion: :mod:`.policy` (behaviour cloning on exported datasets, closed-loop
evaluation in MuJoCo)."""
