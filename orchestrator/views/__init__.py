"""What people see: progress, plots, experiment records, per-trial logs."""
