"""Ray Tune's result keys (``ray.tune.result``): the names scripts import to read or set
entries of a result."""

from __future__ import annotations

__all__ = [
    "AUTO_RESULT_KEYS",
    "DEFAULT_METRIC",
    "DONE",
    "EPISODES_TOTAL",
    "EPISODE_REWARD_MEAN",
    "HOSTNAME",
    "MEAN_ACCURACY",
    "MEAN_LOSS",
    "NODE_IP",
    "PID",
    "SHOULD_CHECKPOINT",
    "TIME_THIS_ITER_S",
    "TIMESTAMP",
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
HOSTNAME = "hostname"
TIMESTAMP = "timestamp"
EPISODES_TOTAL = "episodes_total"

#: The keys Tune adds to every result (what a script filters out to see its own).
AUTO_RESULT_KEYS = (
    TRAINING_ITERATION,
    TIME_TOTAL_S,
    EPISODES_TOTAL,
    TIMESTEPS_TOTAL,
    NODE_IP,
    HOSTNAME,
    PID,
    TIME_TOTAL_S,
    TIME_THIS_ITER_S,
    TIMESTAMP,
    "date",
    "time_since_restore",
    "timesteps_since_restore",
    "iterations_since_restore",
    "config",
    "checkpoint_dir_name",
)
