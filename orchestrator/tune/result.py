"""Ray Tune's result keys (``ray.tune.result``): the names scripts import to read or set
entries of a result."""

from __future__ import annotations

__all__ = [
    "DEFAULT_METRIC",
    "DONE",
    "EPISODE_REWARD_MEAN",
    "MEAN_ACCURACY",
    "MEAN_LOSS",
    "NODE_IP",
    "PID",
    "SHOULD_CHECKPOINT",
    "TIME_THIS_ITER_S",
    "TIME_TOTAL_S",
    "TIMESTEPS_TOTAL",
    "TRAINING_ITERATION",
    "TRIAL_ID",
]

#: In a class trainable's result: save a checkpoint right after this result.
SHOULD_CHECKPOINT = "should_checkpoint"
#: In a result: the trial is done (it ends after this result).
DONE = "done"
#: The metric of a function trainable that returns (or yields) a bare number.
DEFAULT_METRIC = "_metric"
TRAINING_ITERATION = "training_iteration"
TIME_THIS_ITER_S = "time_this_iter_s"
TIME_TOTAL_S = "time_total_s"
TRIAL_ID = "trial_id"
TIMESTEPS_TOTAL = "timesteps_total"
EPISODE_REWARD_MEAN = "episode_reward_mean"
MEAN_ACCURACY = "mean_accuracy"
MEAN_LOSS = "mean_loss"
PID = "pid"
NODE_IP = "node_ip"
