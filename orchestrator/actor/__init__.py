"""What runs in the workers: trainables, the trial actor, uploads, scratch space."""
